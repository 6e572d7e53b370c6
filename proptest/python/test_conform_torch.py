"""pfx.conform on a real framework: a small causal transformer in PyTorch (torch_engine.py, CPU),
at several prefill chunks, and its verdict checked independently (docs/conform.md, "PyTorch"): on a
grid it calls exact, a Python lane replaying multi-turn conversations with that rule chunk sees no
mismatch against cold runs; on a grid it calls unsafe, the mismatch it names is reproduced, directly and by a lane on that grid.

Debian's python3-torch is built for /usr/bin/python3; where torch cannot be imported, every test is
skipped (and the suite reports itself skipped)."""
from __future__ import annotations

import struct
import unittest

import pfx
from support import rng, verifies

try:
    import torch
    torch.set_num_threads(1)  # the machine's cores are shared; one thread is also what is documented
    from torch_engine import TorchTransformer
    WHY_NOT = ""
except ImportError as error:  # torch absent, or built for another interpreter
    WHY_NOT = f"torch cannot be imported ({error}); install Debian's python3-torch and run with /usr/bin/python3"

import conform_lane

CAPACITY = 512
CHUNKS = (1, 4, 8, 16)


def bits(x: float) -> bytes:
    return struct.pack("f", x)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class TorchConform(unittest.TestCase):
    reports: dict = {}

    @classmethod
    def setUpClass(cls):
        cls.reports = {chunk: pfx.conform(TorchTransformer(chunk), budget="quick") for chunk in CHUNKS}
        for chunk, report in cls.reports.items():
            print(f"\nPyTorch, chunk {chunk}:\n{report}", flush=True)

    @verifies("CONF-3")
    def test_every_chunk_has_an_exact_grid_and_the_cold_runs_agree(self):
        for chunk, report in self.reports.items():
            with self.subTest(chunk=chunk):
                self.assertTrue(report.deterministic, str(report))
                self.assertIsNotNone(report.recommended, str(report))
                self.assertTrue(report.grid(chunk).exact, str(report))  # its own grid: THM-1's premise
                self.assertEqual(report.verdict, "safe")

    @verifies("CONF-3 THM-1")
    def test_a_lane_on_an_exact_grid_sees_no_mismatch_over_multi_turn_conversations(self):
        for chunk, report in self.reports.items():
            engine = TorchTransformer(chunk)
            prompts = conform_lane.workload(rng(self), engine.vocab, turns=30, longest=200)
            for grid in {report.recommended, chunk}:
                with self.subTest(chunk=chunk, rule_chunk=grid):
                    self.assertTrue(report.grid(grid).exact)
                    replayed = conform_lane.replay(engine, grid, prompts, CAPACITY)
                    self.assertEqual(replayed["mismatches"], 0, f"chunk {chunk}, rule chunk {grid}")
                    self.assertGreater(replayed["reused"], 0)

    @verifies("CONF-3")
    def test_the_mismatch_named_on_an_unsafe_grid_is_reproduced(self):
        reproduced = 0
        for chunk, report in self.reports.items():
            engine = TorchTransformer(chunk)
            for grid in report.grids:
                if grid.exact:
                    continue
                with self.subTest(chunk=chunk, grid=grid.grid):
                    m = grid.mismatch
                    self.assertEqual(m.offset % grid.grid, 0)
                    self.assertEqual(m.held[:m.offset], m.prompt[:m.offset])
                    row, logits, cold_logits = conform_lane.reproduce(engine, m, CAPACITY)
                    d = m.difference
                    if d.where == "row":
                        self.assertIsNotNone(row)
                        self.assertEqual(row[:4], (d.row, d.layer, d.plane, d.index))
                        self.assertEqual((bits(row[4]), bits(row[5])), (bits(d.got), bits(d.expected)))
                    else:
                        self.assertIsNone(row)
                        self.assertEqual(logits[d.index * 4:d.index * 4 + 4], bits(d.got))
                        self.assertEqual(cold_logits[d.index * 4:d.index * 4 + 4], bits(d.expected))
                    # And a lane on that grid, serving the held prompt and then the prompt, sees it: the
                    # rule grants exactly that offset (the two share `offset` tokens, then differ).
                    served = conform_lane.replay(engine, grid.grid, [m.held, m.prompt], CAPACITY)
                    self.assertEqual(served["offsets"], {0, m.offset})
                    self.assertEqual(served["mismatches"], 1)
                    reproduced += 1
        self.assertGreater(reproduced, 0, "no grid was unsafe on PyTorch at any chunk: nothing was reproduced")


    @verifies("CONF-3 PY-4")
    def test_an_engine_that_keeps_a_tensor_of_kv_is_told_so(self):
        kept = []

        class Keeper(TorchTransformer):
            def prefill(self, tokens, start, kv):
                # torch.frombuffer's tensor keeps kv and its address, not a buffer export of it
                kept.append(torch.frombuffer(kv, dtype=torch.float32))
                return super().prefill(tokens, start, kv)
        for run in (lambda: pfx.conform(Keeper(4), budget="quick"), lambda: pfx.Lane(Keeper(4), capacity=64).serve([1, 2])):
            with self.assertRaisesRegex(ValueError, "engine.prefill kept a view of kv after it returned"):
                run()
            kept.clear()


if __name__ == "__main__":
    unittest.main()
