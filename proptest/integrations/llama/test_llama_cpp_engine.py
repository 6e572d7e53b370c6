"""pfx.integrations.llama_cpp.LlamaCppEngine on a model written by pfx.integrations.tiny_gguf: the engine
protocol of an engine that owns its cache (prefill, decode, forget, read_rows), and what THM-1 says
of it: a resume on the grid of the chunk equals a cold run, byte for byte.

Run as the Python suites are (proptest/python/run_tests.py, which writes the report the requirements
check reads), with the model in PFX_LLAMA_MODEL. Every test is skipped, with the reason, when
llama_cpp cannot be imported or no model is given.
"""

from __future__ import annotations

import os
import unittest

import pfx  # the build's python/ folder is on PYTHONPATH (CTest puts it there)
from pfx.integrations import llama_cpp as llama_cpp_module
from support import rng, verifies  # proptest/python, on the path that run_tests.py sets

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.environ.get("PFX_LLAMA_MODEL", "")


def why_not() -> str:
    """Why the suite cannot run here, or ""."""
    if not MODEL:
        return ("no model: PFX_LLAMA_MODEL names the GGUF file pfx.integrations.tiny_gguf writes, which the build's "
                "fixture writes where llama.cpp was found (scripts/llama.sh)")
    try:
        llama_cpp_module._llama_cpp()
    except Exception as e:  # noqa: BLE001
        return f"llama_cpp cannot be imported ({type(e).__name__}: {e}); scripts/llama.sh --python installs it"
    return ""


WHY_NOT = why_not()


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


@unittest.skipIf(WHY_NOT, WHY_NOT)
class LlamaCppEngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, flash_attn="on", threads=1, capacity=512)

    @verifies("PY-4")
    def test_protocol_attributes(self):
        self.assertEqual(self.engine.chunk, 16)
        self.assertEqual(self.engine.vocab, 512)
        self.assertEqual(self.engine.capacity, 512)

    @verifies("PY-4 DRV-8 THM-1")
    def test_resume_on_the_grid_equals_the_cold_run(self):
        r = rng(self)
        for _ in range(4):
            prompt = [r.randrange(3, 512) for _ in range(r.randrange(20, 90))]
            reference = cold(self.engine, prompt)
            for offset in range(16, len(prompt), 16):
                held = prompt[:offset] + [r.randrange(3, 512) for _ in range(r.randrange(0, 16))]
                self.assertEqual(resumed(self.engine, held, prompt, offset), reference, f"offset {offset}")

    @verifies("PY-4 DRV-8")
    def test_read_rows_sees_a_changed_row(self):
        prompt = list(range(3, 40))
        _, rows = cold(self.engine, prompt)
        other = prompt[:-1] + [prompt[-1] + 1]
        _, changed = cold(self.engine, other)
        self.assertEqual(len(rows), len(changed))
        self.assertNotEqual(rows, changed)
        self.assertEqual(rows[: len(rows) // 2][:10], changed[:10])  # the first rows are the same

    @verifies("PY-4 DRV-9")
    def test_read_each_row_gives_each_rows_own_read_from_one_serialization(self):
        prompt = list(range(3, 40))
        cold(self.engine, prompt)
        for start, end in [(0, len(prompt)), (5, 21), (7, 7)]:
            each = self.engine.read_each_row(start, end)
            self.assertEqual(each, [self.engine.read_rows(p, p + 1) for p in range(start, end)])
        with self.assertRaisesRegex(ValueError, "no row at position 37"):
            self.engine.read_each_row(0, 38)

    @verifies("PY-4 DRV-8")
    def test_forget_drops_rows(self):
        cold(self.engine, list(range(3, 40)))
        self.engine.forget(20)
        with self.assertRaisesRegex(ValueError, "no row at position 20"):
            self.engine.read_rows(0, 21)

    @verifies("PY-4 DRV-8")
    def test_decode_writes_one_row_and_returns_logits(self):
        prompt = list(range(5, 5 + 33))
        cold(self.engine, prompt[:-1])
        logits = self.engine.decode(prompt[-1], len(prompt) - 1)
        self.assertEqual(logits.shape, (512,))
        self.assertEqual(len(self.engine.read_rows(0, len(prompt))) * 32, len(self.engine.read_rows(0, 32)) * 33)

    @verifies("PY-4")
    def test_bad_arguments_raise(self):
        with self.assertRaises(FileNotFoundError):
            llama_cpp_module.LlamaCppEngine(os.path.join(HERE, "no-such-model.gguf"), chunk=16)
        with self.assertRaisesRegex(ValueError, "ubatch 32"):
            llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, ubatch=32)
        with self.assertRaisesRegex(ValueError, "expected 1 to the chunk"):
            self.engine.prefill(list(range(3, 3 + 17)), 0)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class PfxOverLlamaCppTest(unittest.TestCase):
    """pfx.conform and pfx.Lane accept the engine (an engine that owns its cache)."""

    def engine(self, **kw):
        return llama_cpp_module.LlamaCppEngine(MODEL, chunk=64, flash_attn="on", threads=1, capacity=2048, **kw)

    @verifies("CONF-3 CEX-1")
    def test_conform_finds_chunk_64_safe_and_rule_chunk_1_unsafe(self):
        report = pfx.conform(self.engine())
        self.assertEqual(report.verdict, "safe")
        self.assertEqual(pfx.conform(self.engine(), rule_chunk=1).verdict, "unsafe")

    @verifies("PY-4 DRV-8 THM-1")
    def test_lane_with_reuse_equals_lane_without_bit_for_bit(self):
        r = rng(self)
        lane = pfx.Lane(self.engine(), keep_min=64, capacity=2048)
        cold = pfx.Lane(self.engine(), keep_min=64, capacity=2048, enabled=False)
        conversation = [r.randrange(3, 512) for _ in range(100)]
        reused = 0
        for _ in range(4):
            a = lane.serve(conversation, 8)
            b = cold.serve(conversation, 8)
            reused += a.decision.offset
            self.assertEqual(list(a.generated), list(b.generated))
            self.assertEqual(bytes(a.logits), bytes(b.logits))
            conversation = conversation + list(a.generated) + [r.randrange(3, 512) for _ in range(50)]
        self.assertGreater(reused, 0)

