"""pfx.conform on the numpy engine of docs/python.md (numpy_engine.py): the check runs, finds a grid,
and a lane on it sees no mismatch. Debian's python3-numpy is for /usr/bin/python3; where numpy cannot
be imported, the tests are skipped."""
from __future__ import annotations

import unittest

import pfx
from support import rng, verifies

try:
    from numpy_engine import NumpyEngine
    WHY_NOT = ""
except ImportError as error:
    WHY_NOT = f"numpy cannot be imported ({error}); install Debian's python3-numpy and run with /usr/bin/python3"

import conform_lane


@unittest.skipIf(WHY_NOT, WHY_NOT)
class NumpyConform(unittest.TestCase):
    @verifies("CONF-3")
    def test_the_documented_numpy_engine_is_checked_and_its_verdict_holds_in_a_lane(self):
        for chunk in (1, 4, 8):
            with self.subTest(chunk=chunk):
                engine = NumpyEngine(chunk)
                report = pfx.conform(engine, budget="quick")
                self.assertTrue(report.deterministic, str(report))
                self.assertIsNotNone(report.recommended, str(report))
                prompts = conform_lane.workload(rng(self), engine.vocab, turns=20, longest=120)
                replayed = conform_lane.replay(engine, report.recommended, prompts, 256)
                self.assertEqual(replayed["mismatches"], 0, str(report))


    @verifies("CONF-3 PY-4")
    def test_an_engine_that_keeps_a_numpy_view_of_kv_is_told_so(self):
        import numpy as np
        kept = []
        # Views of pfx's rows that outlive the call: np.frombuffer takes kv's buffer itself, np.asarray
        # a memoryview of it.
        for view in (lambda kv: np.frombuffer(kv, dtype=np.float32), lambda kv: np.asarray(kv)[0]):
            class Keeper(NumpyEngine):
                def prefill(self, tokens, start, kv):
                    kept.append(view(kv))
                    return super().prefill(tokens, start, kv)
            for run in (lambda: pfx.conform(Keeper(4), budget="quick"),
                        lambda: pfx.Lane(Keeper(4), capacity=64).serve([1, 2])):
                with self.assertRaisesRegex(ValueError, "engine.prefill kept a view of kv after it returned"):
                    run()
                kept.clear()


if __name__ == "__main__":
    unittest.main()
