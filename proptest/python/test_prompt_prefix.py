"""pfx.PromptPrefix against the original class, on random call sequences under every environment
setting docs/python.md lists, with prompts and ids passed as lists, tuples, arrays and numpy arrays,
and copies and pickles taken along the way."""
from __future__ import annotations

import array
import copy
import pickle
import unittest

import pfx
from support import SEED, environment, fresh_pfx, fresh_seed_module, rng, state, verifies

try:
    import numpy
except ImportError:  # Debian's python3-numpy is for /usr/bin/python3; the pip install check has it
    numpy = None

# The settings the comparison runs under: unset (the original's defaults), every spelling of on and
# off, and keep_min in Python's int() spellings. Where pfx reads a value differently by design
# (docs/python.md: "false", "off", "no", " 0" turn the original on), the original runs with the
# value that means what pfx reads ("0").
FLAGS = ["0", "1", "true", "on", "yes", "TRUE", " On ", "", "false", "off", "no", "NO", " 0"]
MINS = [None, "0", "5", "17", "+3", " 8 ", "1_0", "007"]
ENVIRONMENTS = [{}] + [{"TF_GLM53_PREFIX_CACHE": flag} for flag in FLAGS] + [
    {"TF_GLM53_PREFIX_CACHE_MIN": m} for m in MINS[1:]] + [
    {"TF_GLM53_PREFIX_CACHE": "1", "TF_GLM53_PREFIX_CACHE_MIN": "5"},
    {"TF_GLM53_PREFIX_CACHE": "off", "TF_GLM53_PREFIX_CACHE_MIN": "3"}]
SEQUENCES_PER_ENVIRONMENT = 40


def original_equivalent(env: dict) -> dict:
    """The setting that makes the original class read what pfx reads from `env`."""
    flag = env.get("TF_GLM53_PREFIX_CACHE")
    if flag is not None and flag.strip().lower() in ("0", "false", "off", "no"):
        return {**env, "TF_GLM53_PREFIX_CACHE": "0"}
    return env


def as_container(r, ids: list):
    """The same ids as a list, tuple, array.array of each integer width, memoryview or numpy array."""
    kinds = ["list", "tuple", "i", "l", "q", "H", "memoryview"] + (["int32", "int64"] if numpy is not None else [])
    kind = r.choice(kinds)
    if kind == "list":
        return list(ids)
    if kind == "tuple":
        return tuple(ids)
    if kind == "memoryview":
        return memoryview(array.array("i", ids))
    if kind in ("int32", "int64"):
        return numpy.asarray(ids, dtype=kind)
    return array.array(kind, ids)
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
        call = r.choices(["offset_for", "record", "clear", "keep_min", "copy"], weights=[6, 4, 1, 1, 1])[0]
        if call == "offset_for":
            prompt = prompt_near(r, seed.ids, seed_module.KEEP_MIN)
            given = as_container(r, prompt)
            log.append(f"offset_for({given!r})")
            expected, got = seed.offset_for(prompt), ours.offset_for(given)
            if got != expected:
                raise AssertionError(f"offset_for answered {got}, the seed {expected}")
        elif call == "record":
            prompt = prompt_near(r, seed.ids, seed_module.KEEP_MIN)
            ids = prompt + [r.randrange(50) for _ in range(r.randrange(8))]
            end = len(prompt) if r.random() < 0.7 else r.randrange(len(ids) + 1)
            given = as_container(r, ids)
            log.append(f"record({given!r}, {end})")
            seed.record(ids, end)
            ours.record(given, end)
        elif call == "clear":
            log.append("clear()")
            seed.clear()
            ours.clear()
        elif call == "copy":  # an independent, equal object; the old one must no longer matter
            # (pickle needs a class importable by name: not the test's OffByOne, loaded from a path)
            how = r.choice(["copy", "deepcopy", "pickle"] if type(ours).__module__ == "pfx.prompt_prefix" else ["copy", "deepcopy"])
            log.append(f"{how} (and clear the old one)")
            twin = {"copy": copy.copy, "deepcopy": copy.deepcopy,
                    "pickle": lambda p: pickle.loads(pickle.dumps(p))}[how](ours)
            if state(twin) != state(ours) or twin != ours:
                raise AssertionError(f"{how} gave {state(twin)}, not {state(ours)}")
            ours.clear()
            ours = twin
        else:  # both modules' KEEP_MIN, read at call time
            keep_min = r.choice([0, 1, 4, seed_module.KEEP_MIN + 1])
            log.append(f"KEEP_MIN = {keep_min}")
            seed_module.KEEP_MIN = keep_min
            pfx.KEEP_MIN = keep_min
        compare(log[-1])


class OffByOne(pfx.PromptPrefix):
    """Wrong on purpose: one token more than the rule allows (at module level, so that it pickles)."""
    __slots__ = ()

    def offset_for(self, prompt):
        offset = super().offset_for(prompt)
        return offset + 1 if offset else offset


class PyPromptPrefix(unittest.TestCase):
    def tearDown(self):
        fresh_pfx()  # the attributes as this process's environment says

    @verifies("PY-1 SEED-1 AUDIT-259")
    def test_answers_as_the_seed_on_random_call_sequences(self):
        r = rng(self)
        for env in ENVIRONMENTS:
            with environment(**original_equivalent(env)):
                seed_module = fresh_seed_module()
            with environment(**env):
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
                    finally:  # undo a KEEP_MIN assignment
                        with environment(**original_equivalent(env)):
                            seed_module = fresh_seed_module()
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
