"""pfx.PromptPrefix against the seed's class, on random call sequences under several environments."""
from __future__ import annotations

import unittest

import pfx
from support import SEED, environment, fresh_pfx, fresh_seed_module, rng, state, verifies

# The settings the comparison runs under: unset (the seed's defaults), off, on, and custom keep_min.
ENVIRONMENTS = [
    {},
    {"TF_GLM53_PREFIX_CACHE": "0"},
    {"TF_GLM53_PREFIX_CACHE": "1"},
    {"TF_GLM53_PREFIX_CACHE_MIN": "0"},
    {"TF_GLM53_PREFIX_CACHE": "1", "TF_GLM53_PREFIX_CACHE_MIN": "5"},
    {"TF_GLM53_PREFIX_CACHE_MIN": "17"},
    {"TF_GLM53_PREFIX_CACHE": "0", "TF_GLM53_PREFIX_CACHE_MIN": "3"},
]
SEQUENCES_PER_ENVIRONMENT = 150
CALLS_PER_SEQUENCE = 25


def prompt_near(r, held: list, keep_min: int) -> list:
    """A prompt that extends, repeats, shortens or diverges (early or late) from what is held, or a
    fresh one, with lengths around keep_min. Small alphabets make accidental shared prefixes common."""
    alphabet = r.choice([2, 3, 50])

    def fresh(n):
        return [r.randrange(alphabet) for _ in range(n)]

    kind = r.choice(["extend", "repeat", "shorten", "diverge early", "diverge late", "around keep_min",
                     "fresh", "empty"])
    if kind == "extend":
        return held + fresh(r.randrange(1, 12))
    if kind == "repeat":
        return list(held)
    if kind == "shorten":
        return held[:r.randrange(len(held) + 1)]
    if kind in ("diverge early", "diverge late"):
        prompt = held + fresh(r.randrange(6))
        if prompt:
            at = r.randrange(min(3, len(prompt))) if kind == "diverge early" else r.randrange(
                max(0, len(prompt) - 6), len(prompt))
            prompt[at] += 1
        return prompt
    if kind == "around keep_min":
        n = max(0, keep_min + r.randrange(-2, 4))
        return (held + fresh(n))[:n]
    if kind == "fresh":
        return fresh(r.choice([1, keep_min, keep_min + 1, r.randrange(2 * keep_min + 10)]))
    return []


def run_sequence(r, seed_module, log: list) -> None:
    """One random call sequence on the seed's class and on ours, compared after every call."""
    seed = seed_module.PromptPrefix()
    ours = pfx.PromptPrefix()
    log.append("PromptPrefix()")

    def compare(what):
        expected_ids, expected_end, expected_enabled = state(seed)
        # Documented difference: the seed's clear() leaves canonical_end; ours resets it (INV-9).
        expected = (expected_ids, expected_end if expected_ids else 0, expected_enabled)
        if state(ours) != expected:
            raise AssertionError(f"after {what}: pfx holds {state(ours)}, the seed {expected}")

    compare("construction")
    for _ in range(CALLS_PER_SEQUENCE):
        call = r.choices(["offset_for", "record", "clear", "keep_min"], weights=[6, 4, 1, 1])[0]
        if call == "offset_for":
            prompt = prompt_near(r, seed.ids, seed_module.KEEP_MIN)
            log.append(f"offset_for({prompt})")
            expected, got = seed.offset_for(prompt), ours.offset_for(prompt)
            if got != expected:
                raise AssertionError(f"offset_for answered {got}, the seed {expected}")
        elif call == "record":
            prompt = prompt_near(r, seed.ids, seed_module.KEEP_MIN)
            ids = prompt + [r.randrange(50) for _ in range(r.randrange(8))]
            end = len(prompt) if r.random() < 0.7 else r.randrange(len(ids) + 1)
            log.append(f"record({ids}, {end})")
            seed.record(ids, end)
            ours.record(ids, end)
        elif call == "clear":
            log.append("clear()")
            seed.clear()
            ours.clear()
        else:  # both modules' KEEP_MIN, read at call time
            keep_min = r.choice([0, 1, 4, seed_module.KEEP_MIN + 1])
            log.append(f"KEEP_MIN = {keep_min}")
            seed_module.KEEP_MIN = keep_min
            pfx.KEEP_MIN = keep_min
        compare(log[-1])


class PyPromptPrefix(unittest.TestCase):
    def tearDown(self):
        fresh_pfx()  # the attributes as this process's environment says

    @verifies("PY-1 SEED-1 AUDIT-259")
    def test_answers_as_the_seed_on_random_call_sequences(self):
        r = rng(self)
        for env in ENVIRONMENTS:
            with environment(**env):
                seed_module = fresh_seed_module()
                fresh_pfx()
                self.assertEqual((pfx.TF_PREFIX_CACHE, pfx.KEEP_MIN),
                                 (seed_module.TF_PREFIX_CACHE, seed_module.KEEP_MIN), env)
                for _ in range(SEQUENCES_PER_ENVIRONMENT):
                    log = []
                    try:
                        run_sequence(r, seed_module, log)
                    except AssertionError as error:
                        calls = "\n  ".join(log)
                        self.fail(f"{error}\nenvironment {env}, PFX_PY_SEED={SEED}\ncalls:\n  {calls}")
                    finally:
                        seed_module = fresh_seed_module()  # undo a KEEP_MIN assignment
                        fresh_pfx()

    @verifies("PY-1 AUDIT-260")
    def test_never_offers_a_row_decode_wrote(self):
        with environment():
            fresh_pfx()
            seed = fresh_seed_module().PromptPrefix()
            ours = pfx.PromptPrefix()
            prompt = list(range(100))
            generated = [7, 8, 9]
            for prefix in (seed, ours):
                prefix.record(prompt + generated, len(prompt))
            # The next turn repeats the answer: the rows of `generated` were written by decode.
            self.assertEqual(ours.offset_for(prompt + generated + [1, 2]), len(prompt))
            self.assertEqual(ours.offset_for(prompt + generated + [1, 2]),
                             seed.offset_for(prompt + generated + [1, 2]))

    @verifies("PY-1")
    def test_the_comparison_can_fail(self):
        # A class that answers one token more than the rule allows must be caught.
        class OffByOne(pfx.PromptPrefix):
            __slots__ = ()

            def offset_for(self, prompt):
                offset = super().offset_for(prompt)
                return offset + 1 if offset else offset

        with environment(TF_GLM53_PREFIX_CACHE_MIN="2"):
            seed_module = fresh_seed_module()
            original = fresh_pfx().PromptPrefix
            pfx.PromptPrefix = OffByOne
            try:
                r = rng(self)
                caught = 0
                for _ in range(SEQUENCES_PER_ENVIRONMENT):
                    try:
                        run_sequence(r, seed_module, [])
                    except AssertionError:
                        caught += 1
                self.assertGreater(caught, SEQUENCES_PER_ENVIRONMENT // 2)
            finally:
                pfx.PromptPrefix = original


if __name__ == "__main__":
    unittest.main()
