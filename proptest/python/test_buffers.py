"""Token sequences read fast: buffers of integers read in place, lists compared as they are
converted and read only up to the first id that differs from the record; ids a read-only O(1) view
with the buffer protocol; 4 bytes per held token."""
from __future__ import annotations

import array
import unittest

import pfx
from support import rng, verifies

try:
    import numpy
except ImportError:
    numpy = None

KINDS = ["b", "B", "h", "H", "i", "I", "l", "L", "q", "Q"]


class Unreadable:
    """An element that fails the test if pfx ever looks at it."""

    def __index__(self):
        raise AssertionError("pfx read an element the answer does not need")


class PyBuffers(unittest.TestCase):
    @verifies("PY-1 PY-3")
    def test_every_integer_buffer_answers_as_the_list(self):
        r = rng(self)
        for _ in range(300):
            held = [r.randrange(3) for _ in range(r.randrange(0, 40))]
            prompt = held[:r.randrange(len(held) + 1)] + [r.randrange(3) for _ in range(r.randrange(6))]
            if prompt and r.random() < 0.5:
                prompt[r.randrange(len(prompt))] ^= 1
            config = pfx.Config(keep_min=r.randrange(4), chunk=r.choice([1, 2, 3]))
            expected = pfx.decide(config, held, len(held), prompt)
            containers = [array.array(kind, prompt) for kind in KINDS] + [tuple(prompt), iter(prompt), bytes(prompt),
                                                                         memoryview(array.array("q", prompt))]
            if numpy is not None:
                containers += [numpy.asarray(prompt, dtype=t) for t in ("int8", "uint16", "int32", "int64", "uint64")]
            for container in containers:
                machine = pfx.Machine(config)
                machine.record(array.array("l", held), len(held))
                self.assertEqual(machine.ids, held)
                got = machine.query(container if not isinstance(container, type(iter([]))) else iter(prompt))
                self.assertEqual(got, expected, f"{container!r} against {held}")
                self.assertEqual(pfx.common_prefix(held, container if not hasattr(container, "__next__")
                                                   else iter(prompt)), expected.common_prefix if held else 0)

    @verifies("PY-1 PY-3")
    def test_a_prompt_is_read_only_up_to_its_first_difference(self):
        held = list(range(1, 1001))
        machine = pfx.Machine(pfx.Config(keep_min=1))
        machine.record(held, 1000)
        # Differs at token 0: nothing past it is read, whatever it is.
        self.assertEqual(machine.query([0] + [Unreadable()] * 10_000).offset, 0)
        self.assertEqual(machine.query(held[:5] + [9999, Unreadable(), "not even an int"]).offset, 5)
        # Past the end of the record: one id is read beyond it, no more.
        self.assertEqual(machine.query(held + [7, Unreadable()]).offset, 1000)
        # An id the answer reads is checked, in a list or a buffer alike.
        for prompt in ([1, 2, -5, Unreadable()], array.array("q", [1, 2, -5, 9]), array.array("q", [1, 2, 2**40])):
            with self.assertRaises(ValueError) as raised:
                machine.query(prompt)
            self.assertIn("prompt[2]: expected a token id (an integer in 0..2147483647)", str(raised.exception))
        # A bad id past the first difference is never read, so never refused.
        self.assertEqual(machine.query(array.array("q", [1, 2, 0, -5])).offset, 2)
        # record and commit read everything.
        with self.assertRaises(ValueError):
            machine.record(held + [-1], 3)
        self.assertEqual(machine.ids, held)

    @verifies("PY-3 INV-12")
    def test_with_a_prefill_step_the_whole_prompt_is_read(self):
        # The rule then depends on the prompt's length (INV-12): every id is read and checked, and the
        # answer is the one for the whole prompt, not for its prefix up to the first difference.
        held = list(range(1, 11))
        config = pfx.Config(keep_min=0, chunk=2, prefill_step=3)
        machine = pfx.Machine(config)
        machine.record(held, 10)
        prompt = held[:8] + [99] * 6  # differs at 8; 14 tokens, whose cold run ends with 2 in steps of 3
        # A resume at 8 leaves 6 tokens: two full steps, as the cold run does not end alone either.
        self.assertEqual(machine.query(prompt).offset, 8)
        self.assertEqual(pfx.decide(config, held, 10, prompt).offset, 8)
        longer = prompt + [99]  # 15 tokens: the cold run does not end alone, a resume at 8 would (7 = 2 * 3 + 1)
        self.assertEqual((machine.query(longer).offset, machine.query(longer).bound), (6, pfx.Bound.prefill_step))
        self.assertEqual(pfx.decide(config, held, 10, longer).offset, 6)
        for read in (machine.query, lambda p: pfx.decide(config, held, 10, p)):
            with self.assertRaises(ValueError) as raised:
                read(prompt + [-5])
            self.assertIn("prompt[14]: expected a token id (an integer in 0..2147483647)", str(raised.exception))

    @verifies("PY-2 PY-3")
    def test_ids_are_a_view_with_the_sequence_and_buffer_protocols(self):
        r = rng(self)
        held = [r.randrange(2**31) for _ in range(100)]
        prefix = pfx.PromptPrefix()
        prefix.record(held, 80)
        ids = prefix.ids
        self.assertIsInstance(ids, pfx.Ids)
        self.assertEqual((len(ids) - 50, ids[0], ids[-1], ids[3:9], ids[::-7]), (50, held[0], held[-1], held[3:9], held[::-7]))
        self.assertEqual(list(ids), held)
        self.assertTrue(ids == held and ids == tuple(held) and not (ids != held) and ids != held[:-1])
        self.assertTrue(held[7] in ids and -1 not in ids and "x" not in ids)
        self.assertEqual((ids.index(held[9]), ids.count(held[9]), ids.tolist()),
                         (held.index(held[9]), held.count(held[9]), held))
        self.assertEqual(ids + [1], held + [1])
        with self.assertRaises(IndexError):
            ids[100]
        view = memoryview(ids)
        self.assertEqual((view.format, view.itemsize, view.readonly, view.tolist()), ("i", 4, True, held))
        # While the buffer is alive, an event that would move the ids is refused and changes nothing.
        for event in (lambda: prefix.record([1], 1), prefix.clear, lambda: prefix._machine.reserve(10**6)):
            with self.assertRaises(BufferError):
                event()
            self.assertEqual(prefix.ids, held)
        self.assertEqual(prefix.offset_for(held + [1]), 80)  # reading is fine
        view.release()
        prefix.record([5, 6], 2)
        self.assertEqual(ids, [5, 6])  # a view follows the record
        if numpy is not None:
            as_array = numpy.asarray(prefix.ids)
            self.assertEqual((as_array.dtype, as_array.tolist()), (numpy.dtype("int32"), [5, 6]))
            del as_array
            prefix.clear()
        self.assertFalse(pfx.PromptPrefix().ids)
        # A machine's own ids as an argument, as the original allows: read as a copy, not an export.
        prefix.record(held, 80)
        self.assertEqual(prefix.offset_for(prefix.ids), 80)
        prefix.record(prefix.ids, 50)
        self.assertEqual((prefix.ids, prefix.canonical_end), (held, 50))
        self.assertEqual(pfx.common_prefix(prefix.ids, prefix.ids), 100)

    @verifies("PY-1")
    def test_holds_4_bytes_per_token(self):
        machine = pfx.Machine()
        empty = machine.memory_bytes
        for n in (1, 1000, 100_000):
            machine.record(array.array("i", range(n)), n)
            self.assertLessEqual(machine.memory_bytes, empty + 4 * n)
            machine.clear()


if __name__ == "__main__":
    unittest.main()
