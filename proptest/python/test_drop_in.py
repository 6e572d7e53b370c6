"""What a drop-in needs beyond the answers: copies and pickles that are independent and equal, a repr
that shows the state, and the protocol as a context manager for engines written in Python."""
from __future__ import annotations

import copy
import pickle
import unittest

import pfx
from support import environment, fresh_pfx, rng, verifies


def copies(value):
    return {"copy": copy.copy(value), "deepcopy": copy.deepcopy(value),
            "pickle": pickle.loads(pickle.dumps(value)), "pickle 0": pickle.loads(pickle.dumps(value, protocol=0))}


class PyDropIn(unittest.TestCase):
    def setUp(self):
        with environment():
            fresh_pfx()

    @verifies("PY-1 PY-2")
    def test_copies_and_pickles_are_independent_and_equal(self):
        r = rng(self)
        for _ in range(30):
            ids = [r.randrange(2**31) for _ in range(r.randrange(0, 200))]
            end = r.randrange(len(ids) + 1)
            prefix = pfx.PromptPrefix()
            prefix.record(ids, end)
            machine = pfx.Machine(pfx.Config(enabled=True, keep_min=r.randrange(9), chunk=r.randrange(1, 5),
                                             prefill_step=r.choice([0, 3, 256, 2**64 - 1])))
            machine.record(ids, end)
            for original in (prefix, machine):
                for how, twin in copies(original).items():
                    self.assertIsNot(twin, original)
                    self.assertEqual(twin, original, how)
                    if original is machine:  # every knob, the prefill step too
                        self.assertEqual(twin.config, machine.config, how)
                    self.assertEqual((list(twin.ids), twin.canonical_end), (ids, end), how)
                    twin.clear()  # the copy changes, the original does not
                    self.assertEqual((list(original.ids), original.canonical_end), (ids, end), how)
                    if ids:
                        self.assertNotEqual(twin, original, how)
        off = pfx.PromptPrefix()
        off.enabled = False
        self.assertFalse(pickle.loads(pickle.dumps(off)).enabled)

    @verifies("PY-3 INV-8")
    def test_a_machine_being_written_copies_but_does_not_pickle(self):
        machine = pfx.Machine(pfx.Config(keep_min=2))
        machine.record([1, 2, 3, 4], 4)
        machine.begin([1, 2, 3, 9], 3)
        twin = copy.deepcopy(machine)
        self.assertEqual((twin.phase, twin.begin_offset, twin.ids), (pfx.Phase.writing, 3, [1, 2, 3]))
        twin.commit([1, 2, 3, 9, 8], 4)
        self.assertEqual((machine.phase, machine.ids), (pfx.Phase.writing, [1, 2, 3]))
        with self.assertRaises(TypeError) as raised:
            pickle.dumps(machine)
        self.assertIn("commit or abort", str(raised.exception))
        with self.assertRaises(ValueError):
            pfx.Machine.__new__(pfx.Machine).__setstate__((1, True, 2, 1, b"\xff\xff\xff\xff", 1))  # id -1

    @verifies("PY-3")
    def test_a_machine_pickled_before_the_prefill_step_loads_without_one(self):
        # Version 1 of the pickled state had no prefill step: it loads with none (0), and no padding.
        old = pfx.Machine.__new__(pfx.Machine)
        old.__setstate__((1, True, 2, 4, b"\x01\x00\x00\x00\x02\x00\x00\x00", 2))
        self.assertEqual((old.config, old.ids, old.canonical_end), (pfx.Config(True, 2, 4, 0, 0), [1, 2], 2))
        stepped = pfx.Machine(pfx.Config(keep_min=2, chunk=4, prefill_step=256))
        self.assertEqual(stepped.__getstate__()[0], 4)
        self.assertEqual(pickle.loads(pickle.dumps(stepped)).config.prefill_step, 256)
        # v2 without the step; v3 without the padding; v4 without decode_rows_exact; v5, which no pfx wrote.
        for bad in ((2, True, 2, 4, b"", 0), (3, True, 2, 4, b"", 0, 0), (4, True, 2, 4, b"", 0, 0, 0),
                    (5, True, 2, 4, b"", 0, 0, 0, False)):
            with self.assertRaises(ValueError):
                pfx.Machine.__new__(pfx.Machine).__setstate__(bad)

    @verifies("PY-3")
    def test_a_machine_pickled_before_the_admission_padding_loads_without_one(self):
        # Version 2 of the pickled state had a prefill step but no admission padding: it loads with none
        # (0); version 3 and after keep it, at full width too.
        old = pfx.Machine.__new__(pfx.Machine)
        old.__setstate__((2, True, 2, 4, b"\x01\x00\x00\x00\x02\x00\x00\x00", 2, 256))
        self.assertEqual((old.config, old.ids, old.canonical_end), (pfx.Config(True, 2, 4, 256, 0), [1, 2], 2))
        for padding in (3, 2**64 - 1):
            padded = pfx.Machine(pfx.Config(keep_min=2, chunk=4, prefill_step=256, admission_padding=padding))
            padded.record([1, 2, 3], 3)
            state = padded.__getstate__()
            self.assertEqual((state[0], len(state), state[7]), (4, 9, padding))
            twin = pickle.loads(pickle.dumps(padded))
            self.assertEqual((twin.config, twin.ids), (padded.config, [1, 2, 3]))
        new = pfx.Machine.__new__(pfx.Machine)
        new.__setstate__((3, True, 2, 4, b"\x01\x00\x00\x00", 1, 256, 5))
        self.assertEqual((new.config, new.ids), (pfx.Config(True, 2, 4, 256, 5), [1]))
        with self.assertRaises(ValueError):
            pfx.Machine.__new__(pfx.Machine).__setstate__((3, True, 2, 4, b"", 0, 0, -1))

    @verifies("PY-3 INV-2")
    def test_a_machine_pickled_before_decode_rows_exact_loads_without_it(self):
        # Version 3 of the pickled state had no decode_rows_exact: it loads with it off, keeping the
        # record; version 4 keeps it, and its record says which rows decode wrote.
        old = pfx.Machine.__new__(pfx.Machine)
        old.__setstate__((3, True, 2, 4, b"\x01\x00\x00\x00\x02\x00\x00\x00", 1, 256, 5))
        self.assertEqual((old.config, old.ids, old.canonical_end),
                         (pfx.Config(True, 2, 4, 256, 5, False), [1, 2], 1))
        exact = pfx.Machine(pfx.Config(keep_min=2, chunk=2, decode_rows_exact=True))
        exact.record([1, 2, 3, 4, 5], 2)
        state = exact.__getstate__()
        self.assertEqual((state[0], len(state), state[8]), (4, 9, True))
        twin = pickle.loads(pickle.dumps(exact))
        self.assertEqual((twin.config, twin.ids, twin.canonical_end), (exact.config, [1, 2, 3, 4, 5], 2))
        self.assertEqual(twin.query([1, 2, 3, 4, 5, 6]).offset, 4)  # rows decode wrote, on the grid
        off = pickle.loads(pickle.dumps(pfx.Machine(pfx.Config(keep_min=2, chunk=2))))
        self.assertFalse(off.config.decode_rows_exact)
        for bad in ((4, True, 2, 4, b"", 0, 0, 0, 2), (4, True, 2, 4, b"", 0, 0, 0, "yes")):
            with self.assertRaises((TypeError, ValueError)):
                pfx.Machine.__new__(pfx.Machine).__setstate__(bad)

    @verifies("PY-1")
    def test_repr_shows_the_held_length_canonical_end_and_enabled(self):
        prefix = pfx.PromptPrefix()
        prefix.record(list(range(70)), 65)
        self.assertEqual(repr(prefix), "PromptPrefix(len(ids)=70, canonical_end=65, enabled=True)")
        prefix.enabled = False
        self.assertEqual(repr(prefix), "PromptPrefix(len(ids)=0, canonical_end=0, enabled=False)")
        self.assertEqual(repr(pfx.PromptPrefix().ids), "pfx.Ids([])")

    @verifies("PY-3 INV-8 INV-10")
    def test_write_commits_or_aborts_as_the_block_ends(self):
        lane = pfx.Machine(pfx.Config(keep_min=2, chunk=2))
        lane.record([1, 2, 3, 4, 5, 6], 6)
        prompt = [1, 2, 3, 4, 5, 9]
        with lane.write(prompt) as w:  # the granted offset
            self.assertEqual((w.offset, w.decision.offset, lane.phase), (4, 4, pfx.Phase.writing))
            w.commit(prompt + [7], len(prompt))
        self.assertEqual((lane.phase, lane.ids, lane.canonical_end), (pfx.Phase.idle, prompt + [7], 6))

        class EngineFailed(Exception):
            pass

        # An exception inside: aborted, the record keeps ids[0:offset), the exception goes on.
        with self.assertRaises(EngineFailed):
            with lane.write(prompt + [8, 8], 0) as w:
                self.assertEqual(w.offset, 0)
                raise EngineFailed()
        self.assertEqual((lane.phase, lane.ids, lane.canonical_end), (pfx.Phase.idle, [], 0))

        lane.record(prompt, 6)
        with lane.write(prompt + [1]) as w:  # leaving without commit aborts too
            self.assertEqual(w.offset, 6)
        self.assertEqual((lane.phase, lane.ids), (pfx.Phase.idle, prompt))

        with self.assertRaises(pfx.Refused):  # a refused commit: the block aborts
            with lane.write(prompt + [1]) as w:
                w.commit([0] * 10, 7)  # drops the kept prefix
        self.assertEqual((lane.phase, lane.ids), (pfx.Phase.idle, prompt))

        with self.assertRaises(pfx.Refused):  # a refused begin changes nothing
            with lane.write(prompt + [1], 3):
                self.fail("entered a block whose begin was refused")
        self.assertEqual((lane.phase, lane.ids), (pfx.Phase.idle, prompt))

        with lane.write(prompt + [1]) as w:
            w.commit(prompt + [1, 2], 7)
            with self.assertRaises(RuntimeError):
                w.commit(prompt + [1, 2], 7)
        self.assertEqual(lane.ids, prompt + [1, 2])


if __name__ == "__main__":
    unittest.main()
