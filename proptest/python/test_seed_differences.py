"""Each case where the seed's PromptPrefix misbehaves: the seed's behaviour, shown, and ours, which
raises an error naming the problem and changes nothing (docs/spec.md, "Differences from the seed")."""
from __future__ import annotations

import array
import unittest

import pfx
from support import environment, fresh_pfx, fresh_seed_module, state, verifies

PROMPT = list(range(100))
GENERATED = [1000, 1001, 1002]


class PySeedDifferences(unittest.TestCase):
    def setUp(self):
        self._environment = environment()  # unset: reuse on, keep_min 64
        self._environment.__enter__()
        fresh_pfx()
        self.seed_module = fresh_seed_module()
        self.seed = self.seed_module.PromptPrefix()
        self.ours = pfx.PromptPrefix()
        for prefix in (self.seed, self.ours):
            prefix.record(PROMPT + GENERATED, len(PROMPT))

    def tearDown(self):
        self._environment.__exit__(None, None, None)
        fresh_pfx()

    def assert_refused(self, call, error, words):
        """`call` raises `error` with `words` in its message, and the record is as it was."""
        def everything():  # what it shows, and the machine under it (which offset_for may reconfigure)
            machine = self.ours._machine
            return state(self.ours), machine.config, machine.query(PROMPT + [5])

        before = everything()
        with self.assertRaises(error) as raised:
            call()
        self.assertIn(words, str(raised.exception))
        self.assertEqual(everything(), before)
        return raised.exception

    @verifies("PY-2 INV-9 INV-10")
    def test_refuses_a_canonical_end_past_the_ids(self):
        self.seed.record([1, 2, 3], 5)
        self.assertEqual(self.seed.canonical_end, 5)  # the seed claims canonical rows it does not hold
        error = self.assert_refused(lambda: self.ours.record([1, 2, 3], 5), pfx.Refused,
                                    "canonical_end is past the end of ids")
        self.assertEqual(error.refusal, "canonical_end past ids")
        self.assertIsInstance(error, ValueError)

    @verifies("PY-2")
    def test_refuses_a_negative_canonical_end(self):
        self.seed.record(PROMPT, -3)
        self.assertEqual(self.seed.canonical_end, 0)  # silently clamped
        self.assert_refused(lambda: self.ours.record(PROMPT, -3), ValueError, "canonical_end must be >= 0, not -3")

    @verifies("PY-2")
    def test_refuses_a_canonical_end_that_is_not_an_integer(self):
        self.seed.record(PROMPT, 70.9)
        self.assertEqual(self.seed.canonical_end, 70)  # silently truncated
        self.seed.record(PROMPT, "80")
        self.assertEqual(self.seed.canonical_end, 80)
        for bad in (70.9, "80", None):
            self.assert_refused(lambda: self.ours.record(PROMPT, bad), TypeError, "canonical_end must be an integer")

    @verifies("PY-2")
    def test_refuses_token_ids_that_are_not_integers(self):
        self.seed.record([1, 2, "3"], 3)  # accepted: the seed compares anything with ==
        self.assertEqual(self.seed.ids, [1, 2, "3"])
        for bad in ("3", 3.0, None):
            self.assert_refused(lambda: self.ours.record([1, 2, bad], 3), TypeError, "ids[2]: expected a token id")
            self.assert_refused(lambda: self.ours.offset_for(PROMPT[:1] + [bad]), TypeError,
                                "prompt[1]: expected a token id")

    @verifies("PY-2")
    def test_refuses_token_ids_outside_the_one_range(self):
        self.seed.record([0, 2**40, -1], 2)
        self.assertEqual(self.seed.ids, [0, 2**40, -1])
        for bad in (-1, -2**31, -2**31 - 1, 2**31, 2**40, 2**70):
            message = f"expected a token id (an integer in 0..2147483647), got {bad}"
            self.assert_refused(lambda: self.ours.record([0, 1, 2, bad], 3), ValueError, f"ids[3]: {message}")
            self.assert_refused(lambda: self.ours.offset_for(PROMPT[:3] + [bad]), ValueError, f"prompt[3]: {message}")
            if -2**63 <= bad < 2**63:  # a buffer of int64 gets the same words
                self.assert_refused(lambda: self.ours.record(array.array("q", [0, 1, 2, bad]), 3), ValueError,
                                    f"ids[3]: {message}")
        self.ours.record([2**31 - 1, 0], 2)  # the ends of the range are token ids
        self.assertEqual(self.ours.ids, [2**31 - 1, 0])

    @verifies("PY-2 AUDIT-253")
    def test_forgets_the_record_when_disabled(self):
        for prefix in (self.seed, self.ours):
            prefix.enabled = False
            prefix.enabled = True
        # The seed offers rows of a KV state that was written while it recorded nothing.
        self.assertEqual(self.seed.offset_for(PROMPT + [5]), len(PROMPT))
        self.assertEqual(self.ours.offset_for(PROMPT + [5]), 0)
        self.assertEqual(state(self.ours), ([], 0, True))

    @verifies("PY-2 AUDIT-253")
    def test_refuses_assigning_ids_or_canonical_end(self):
        self.seed.ids = [9] + PROMPT[1:]  # bypasses the rule: now claims rows computed from other tokens
        self.seed.canonical_end = 500
        self.assertEqual(self.seed.offset_for([9] + PROMPT[1:] + [5]), len(PROMPT))
        for name, value in (("ids", [9]), ("canonical_end", 500)):
            self.assert_refused(lambda: setattr(self.ours, name, value), AttributeError, "record(ids, canonical_end)")
            self.assert_refused(lambda: delattr(self.ours, name), AttributeError, "read-only")

    @verifies("PY-2 AUDIT-253")
    def test_ids_are_a_read_only_view(self):
        self.seed.ids[0] = 9  # changes what the original believes the KV state holds
        self.assertEqual(self.seed.offset_for([9] + PROMPT[1:] + [5]), len(PROMPT))
        mutations = [lambda ids: ids.__setitem__(0, 9), lambda ids: ids.append(4), lambda ids: ids.extend([4]),
                     lambda ids: ids.insert(0, 4), lambda ids: ids.pop(), lambda ids: ids.remove(PROMPT[0]),
                     lambda ids: ids.clear(), lambda ids: ids.sort(), lambda ids: ids.reverse(),
                     lambda ids: ids.__delitem__(0), lambda ids: ids.__setitem__(slice(0, 2), [1])]
        for mutate in mutations:
            self.assert_refused(lambda: mutate(self.ours.ids), TypeError, "record(ids, canonical_end)")
            self.assert_refused(lambda: mutate(self.ours.ids), TypeError, "clear()")
        with self.assertRaises(TypeError):
            ids = self.ours.ids
            ids += [4]
        self.assertEqual(self.ours.offset_for([9] + PROMPT[1:] + [5]), 0)

    @verifies("PY-2")
    def test_refuses_a_misspelt_attribute(self):
        self.seed.enable = False  # accepted, and reuse stays on
        self.assertTrue(self.seed.enabled)
        self.assert_refused(lambda: setattr(self.ours, "enable", False), AttributeError, "enable")

    @verifies("PY-2")
    def test_refuses_a_negative_keep_min(self):
        self.seed_module.KEEP_MIN = -1
        self.assertEqual(self.seed.offset_for([]), -1)  # a negative offset
        pfx.KEEP_MIN = -1
        self.assert_refused(lambda: self.ours.offset_for([]), pfx.ConfigError, "pfx.KEEP_MIN must be a non-negative")
        pfx.KEEP_MIN = 1.5
        self.assert_refused(lambda: self.ours.offset_for([]), pfx.ConfigError, "pfx.KEEP_MIN must be a non-negative")
        self.assert_refused(pfx.PromptPrefix, pfx.ConfigError, "pfx.KEEP_MIN")

    @verifies("PY-2")
    def test_refuses_bad_arguments_while_disabled(self):
        for prefix in (self.seed, self.ours):
            prefix.enabled = False
        self.seed.record([1], 5)  # ignored
        self.assertEqual(self.seed.canonical_end, len(PROMPT))
        self.assert_refused(lambda: self.ours.record([1], 5), pfx.Refused, "canonical_end is past the end of ids")
        self.assert_refused(lambda: self.ours.record(["a"], 1), TypeError, "ids[0]")

    @verifies("PY-2 INV-9")
    def test_clear_forgets_canonical_end_too(self):
        for prefix in (self.seed, self.ours):
            prefix.clear()
        self.assertEqual(state(self.seed), ([], len(PROMPT), True))  # claims canonical rows of nothing
        self.assertEqual(state(self.ours), ([], 0, True))


if __name__ == "__main__":
    unittest.main()
