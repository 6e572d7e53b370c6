"""What a user of the module reads back (docs/python.md): Machine.reserve names the capacity it
cannot hold, Write.offset stays readable after commit, a ConformMismatch shows itself, a
ConformReport gives the JSON of `pfx conform --json` (checked against docs/schemas/), and copies
and pickles of p.ids are lists."""
from __future__ import annotations

import array
import copy
import json
import os
import pickle
import sys
import unittest
from pathlib import Path

import pfx
from support import environment, fresh_pfx, verifies

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


class Shifted:
    """Rows depend on where the chunk starts (exact only on multiples of `chunk`); the logits depend
    on every token, and are finite."""
    vocab, layers, width = 8, 1, 2

    def __init__(self, chunk):
        self.chunk = chunk

    def prefill(self, tokens, start, kv):
        for i, t in enumerate(tokens):
            kv[0, 0, start + i, 0] = t + 0.25 * i
            kv[0, 0, start + i, 1] = start + i
            kv[0, 1, start + i, 0] = t
            kv[0, 1, start + i, 1] = 1.0
        total = float(sum(tokens) + start)
        return array.array("f", [total + j for j in range(self.vocab)])


class PyVerdicts(unittest.TestCase):
    def setUp(self):
        with environment():
            fresh_pfx()

    @verifies("PY-3")
    def test_reserve_past_what_a_machine_can_hold_names_the_capacity(self):
        m = pfx.Machine()
        with self.assertRaises(ValueError) as huge:
            m.reserve(2**62)
        self.assertIn("Machine.reserve(4611686018427387904)", str(huge.exception))
        self.assertIn("past the largest a machine can hold", str(huge.exception))
        if "libasan" in os.environ.get("LD_PRELOAD", ""):
            # AddressSanitizer ends the process on an allocation past its limit instead of throwing
            # std::bad_alloc, so the MemoryError is checked by the unsanitized suite only.
            print("skipped under AddressSanitizer: reserve(2**40), which it aborts on", file=sys.stderr)
        else:
            with self.assertRaises(MemoryError) as large:
                m.reserve(2**40)
            self.assertIn("Machine.reserve(1099511627776)", str(large.exception))
            self.assertIn("cannot allocate", str(large.exception))
        m.record([1, 2, 3], 3)  # nothing changed: the machine still works
        self.assertEqual(list(m.ids), [1, 2, 3])

    @verifies("PY-3 INV-8")
    def test_the_offset_of_a_write_stays_readable_after_its_commit(self):
        lane = pfx.Machine(pfx.Config(keep_min=2, chunk=2))
        lane.record([1, 2, 3, 4, 5, 6], 6)
        prompt = [1, 2, 3, 4, 5, 9]
        w = lane.write(prompt)
        with self.assertRaises(RuntimeError):  # not begun yet
            _ = w.offset
        with w:
            w.commit(prompt + [7], len(prompt))
            self.assertEqual(w.offset, 4)
        self.assertEqual(w.offset, 4)
        self.assertEqual(lane.phase, pfx.Phase.idle)

    @verifies("PY-1 PY-2")
    def test_copies_and_pickles_of_ids_are_lists(self):
        for holder in (pfx.PromptPrefix(), pfx.Machine()):
            holder.record([5, 6, 7], 2)
            ids = holder.ids
            for how, twin in (("copy", copy.copy(ids)), ("deepcopy", copy.deepcopy(ids)),
                              ("pickle", pickle.loads(pickle.dumps(ids))),
                              ("pickle 0", pickle.loads(pickle.dumps(ids, protocol=0)))):
                self.assertIs(type(twin), list, how)
                self.assertEqual(twin, [5, 6, 7], how)
                holder.clear()
                self.assertEqual(twin, [5, 6, 7], how)  # independent of the holder
                holder.record([5, 6, 7], 2)
                ids = holder.ids

    @verifies("CONF-3")
    def test_a_mismatch_shows_itself_and_the_report_gives_the_programs_json(self):
        report = pfx.conform(Shifted(4), budget="quick", rule_chunk=6)
        m = report.grid(6).mismatch
        text = repr(m)
        self.assertTrue(text.startswith("<ConformMismatch prompt "), text)
        self.assertIn(f"offset {m.offset}", text)
        self.assertIn(str(m.difference), text)
        self.assertNotIn(" object at 0x", text)
        j = json.loads(report.to_json())
        self.assertEqual(j["type"], "conform")
        self.assertEqual((j["verdict"], j["exit_status"]), (report.verdict, report.exit_status))
        self.assertEqual([g["grid"] for g in j["grids"]], [g.grid for g in report.grids])
        self.assertEqual([g["resumes"] for g in j["grids"]], [g.resumes for g in report.grids])
        self.assertEqual(j["grids"][[g.grid for g in report.grids].index(6)]["mismatch"]["offset"], m.offset)
        self.assertEqual(j["recommended"], report.recommended)
        self.assertEqual(j["comparisons"],
                         sum(g.resumes for g in report.grids) + report.cold_runs - report.prompts)
        try:
            import jsonschema  # pip package "jsonschema"
        except ImportError:
            self.skipTest("jsonschema is not installed (pip install jsonschema): the schema is not checked")
        schema = json.loads((SCHEMAS / "conform.schema.json").read_text(encoding="utf-8"))
        jsonschema.validate(j, schema)


if __name__ == "__main__":
    unittest.main()
