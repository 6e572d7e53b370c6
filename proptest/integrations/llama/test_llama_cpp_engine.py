#!/usr/bin/env python3
"""pfx.integrations.llama_cpp.LlamaCppEngine on a model written by write_tiny_gguf.py: the engine
protocol of an engine that owns its cache (prefill, decode, forget, read_rows), and what THM-1 says
of it: a resume on the grid of the chunk equals a cold run, byte for byte. Exits 77 (skipped, with
the reason) when llama_cpp cannot be imported.

    test_llama_cpp_engine.py MODEL.gguf
"""

from __future__ import annotations

import os
import random
import sys
import unittest

import pfx  # the build's python/ folder is on PYTHONPATH (CTest puts it there)
from pfx.integrations import llama_cpp as llama_cpp_module

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = sys.argv[1] if len(sys.argv) > 1 else ""


def cold(engine, prompt):
    """The prompt prefilled from 0 on the chunk grid, after forgetting everything."""
    engine.forget(0)
    logits = None
    for start in range(0, len(prompt), engine.chunk):
        logits = engine.prefill(prompt[start:start + engine.chunk], start)
    return logits.tobytes(), engine.read_rows(0, len(prompt))


def resumed(engine, held, prompt, offset):
    """`held` cold, then the prompt from `offset` (rows [0, offset) shared), on the chunk grid."""
    cold(engine, held)
    engine.forget(offset)
    logits = None
    start = offset
    while start < len(prompt):
        end = min(len(prompt), (start // engine.chunk + 1) * engine.chunk)
        logits = engine.prefill(prompt[start:end], start)
        start = end
    return logits.tobytes(), engine.read_rows(0, len(prompt))


class LlamaCppEngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, flash_attn="on", threads=1, capacity=512)

    def test_protocol_attributes(self):
        self.assertEqual(self.engine.chunk, 16)
        self.assertEqual(self.engine.vocab, 512)
        self.assertEqual(self.engine.capacity, 512)

    def test_resume_on_the_grid_equals_the_cold_run(self):
        rng = random.Random(3)
        for _ in range(4):
            prompt = [rng.randrange(3, 512) for _ in range(rng.randrange(20, 90))]
            reference = cold(self.engine, prompt)
            for offset in range(16, len(prompt), 16):
                held = prompt[:offset] + [rng.randrange(3, 512) for _ in range(rng.randrange(0, 16))]
                self.assertEqual(resumed(self.engine, held, prompt, offset), reference, f"offset {offset}")

    def test_read_rows_sees_a_changed_row(self):
        prompt = list(range(3, 40))
        _, rows = cold(self.engine, prompt)
        other = prompt[:-1] + [prompt[-1] + 1]
        _, changed = cold(self.engine, other)
        self.assertEqual(len(rows), len(changed))
        self.assertNotEqual(rows, changed)
        self.assertEqual(rows[: len(rows) // 2][:10], changed[:10])  # the first rows are the same

    def test_read_each_row_gives_each_rows_own_read_from_one_serialization(self):
        prompt = list(range(3, 40))
        cold(self.engine, prompt)
        for start, end in [(0, len(prompt)), (5, 21), (7, 7)]:
            each = self.engine.read_each_row(start, end)
            self.assertEqual(each, [self.engine.read_rows(p, p + 1) for p in range(start, end)])
        with self.assertRaisesRegex(ValueError, "no row at position 37"):
            self.engine.read_each_row(0, 38)

    def test_forget_drops_rows(self):
        cold(self.engine, list(range(3, 40)))
        self.engine.forget(20)
        with self.assertRaisesRegex(ValueError, "no row at position 20"):
            self.engine.read_rows(0, 21)

    def test_decode_writes_one_row_and_returns_logits(self):
        prompt = list(range(5, 5 + 33))
        cold(self.engine, prompt[:-1])
        logits = self.engine.decode(prompt[-1], len(prompt) - 1)
        self.assertEqual(logits.shape, (512,))
        self.assertEqual(len(self.engine.read_rows(0, len(prompt))) * 32, len(self.engine.read_rows(0, 32)) * 33)

    def test_bad_arguments_raise(self):
        with self.assertRaises(FileNotFoundError):
            llama_cpp_module.LlamaCppEngine(os.path.join(HERE, "no-such-model.gguf"), chunk=16)
        with self.assertRaisesRegex(ValueError, "ubatch 32"):
            llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, ubatch=32)
        with self.assertRaisesRegex(ValueError, "expected 1 to the chunk"):
            self.engine.prefill(list(range(3, 3 + 17)), 0)


class PfxOverLlamaCppTest(unittest.TestCase):
    """pfx.conform and pfx.Lane accept the engine (an engine that owns its cache)."""

    def engine(self, **kw):
        return llama_cpp_module.LlamaCppEngine(MODEL, chunk=64, flash_attn="on", threads=1, capacity=2048, **kw)

    def test_conform_finds_chunk_64_safe_and_rule_chunk_1_unsafe(self):
        report = pfx.conform(self.engine())
        self.assertEqual(report.verdict, "safe")
        self.assertEqual(pfx.conform(self.engine(), rule_chunk=1).verdict, "unsafe")

    def test_lane_with_reuse_equals_lane_without_bit_for_bit(self):
        rng = random.Random(1)
        lane = pfx.Lane(self.engine(), keep_min=64, capacity=2048)
        cold = pfx.Lane(self.engine(), keep_min=64, capacity=2048, enabled=False)
        conversation = [rng.randrange(3, 512) for _ in range(100)]
        reused = 0
        for _ in range(4):
            a = lane.serve(conversation, 8)
            b = cold.serve(conversation, 8)
            reused += a.decision.offset
            self.assertEqual(list(a.generated), list(b.generated))
            self.assertEqual(bytes(a.logits), bytes(b.logits))
            conversation = conversation + list(a.generated) + [rng.randrange(3, 512) for _ in range(50)]
        self.assertGreater(reused, 0)


if __name__ == "__main__":
    try:
        llama_cpp_module._llama_cpp()
    except Exception as e:  # noqa: BLE001
        print(f"SKIPPED: llama_cpp cannot be imported ({type(e).__name__}: {e}); scripts/llama.sh --python installs it")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]], verbosity=2)
