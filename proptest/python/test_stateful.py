"""Stateful properties (hypothesis' RuleBasedStateMachine): pfx.Machine and pfx.PromptPrefix driven by
random sequences of every event, each answer and the whole state compared after every step with the
small model of docs/spec.md written in test_machine.py. And pfx.decide against a model of the prefill
step (INV-12) written here from its definition, over random prompts, chunks and steps up to 2^64 - 1.

hypothesis shrinks a failure to its shortest sequence of steps and prints it as code, with the
`@reproduce_failure(...)` line that replays it; the run's seed is printed by run_tests.py and
PFX_PY_SEED=<seed> replays the whole run. PFX_PY_EXAMPLES=<n> runs more sequences.
"""
from __future__ import annotations

import os
import unittest

import pfx
from support import SEED, verifies
from test_machine import Model, outcome

try:
    from hypothesis import HealthCheck, given, seed, settings, strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
    WHY_NOT = ""
except ImportError as missing:  # every test skips; run_tests.py then reports the suite skipped (77)
    WHY_NOT = f"hypothesis cannot be imported ({missing}): pip install '.[test]'"

if not WHY_NOT:
    EXAMPLES = int(os.environ.get("PFX_PY_EXAMPLES") or 150)
    SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=40, deadline=None, database=None,
                        print_blob=True, suppress_health_check=[HealthCheck.too_slow])

    # A small alphabet makes long common prefixes likely; the largest token id is there too.
    TOKENS = st.sampled_from([0, 1, 2, 2**31 - 1])
    PROMPTS = st.lists(TOKENS, max_size=12)
    # Small knobs reach every reason; a full-width one checks that nothing truncates it.
    KEEP_MINS = st.one_of(st.integers(0, 5), st.sampled_from([2**32, 2**64 - 1]))
    CHUNKS = st.one_of(st.integers(0, 4), st.sampled_from([2**32 + 1, 2**64 - 1]))
    # Prefill steps: none, small ones (a multiple of a small chunk or not), and full width (2^64 - 1 is
    # one step whatever the length).
    STEPS = st.one_of(st.just(0), st.integers(1, 9), st.sampled_from([2**32, 2**64 - 1]))


    class MachineAgainstModel(RuleBasedStateMachine):
        """pfx.Machine, every event at any moment (refused ones too), against the model."""

        def __init__(self):
            super().__init__()
            self.machine, self.model = pfx.Machine(), Model()

        def same(self, machine_call, model_answer):
            answer = outcome(machine_call)
            assert answer == model_answer, f"machine answered {answer!r}, the model {model_answer!r}"

        @rule(enabled=st.booleans(), keep_min=KEEP_MINS, chunk=CHUNKS, step=STEPS, exact=st.booleans())
        def configure(self, enabled, keep_min, chunk, step, exact):
            # chunk 0: the machine refuses it; a change of decode_rows_exact forgets the record
            config = pfx.Config(enabled=enabled, keep_min=keep_min, chunk=chunk, prefill_step=step,
                                decode_rows_exact=exact)
            self.same(lambda: self.machine.configure(config),
                      self.model.configure(enabled, keep_min, chunk, step, 0, exact))

        @rule(prompt=PROMPTS)
        def query(self, prompt):
            self.same(lambda: self.machine.query(prompt), self.model.query(prompt))

        @rule(prompt=PROMPTS, granted=st.booleans(), other=st.integers(0, 13))
        def begin(self, prompt, granted, other):
            # The offset the rule grants (a lane's begin), or any other (refused unless it is 0).
            offset = self.model.decide(prompt)[0] if granted else other
            self.same(lambda: self.machine.begin(prompt, offset), self.model.begin(prompt, offset))

        @rule(generated=st.lists(TOKENS, max_size=4), extends=st.booleans(), short=st.integers(0, 2))
        def commit(self, generated, extends, short):
            # The begun prompt plus generated tokens (a lane's commit), or ids that do not extend it.
            begun = list(self.model.begun)
            ids = begun + generated if extends else generated
            canonical_end = max(len(begun) - short, 0) if extends else len(ids) + short
            self.same(lambda: self.machine.commit(ids, canonical_end), self.model.commit(ids, canonical_end))

        @rule()
        def abort(self):
            self.same(self.machine.abort, self.model.abort())

        @rule(ids=PROMPTS, past=st.integers(0, 2))
        def record(self, ids, past):
            canonical_end = len(ids) - min(past, len(ids)) if past < 2 else len(ids) + 1
            self.same(lambda: self.machine.record(ids, canonical_end), self.model.record(ids, canonical_end))

        @rule()
        def clear(self):
            self.same(self.machine.clear, self.model.clear())

        @invariant()
        def whole_state_is_the_models(self):
            machine = (self.machine.config, list(self.machine.ids), self.machine.canonical_end, self.machine.phase,
                       self.machine.begin_offset)
            assert machine == self.model.everything(), f"machine {machine!r} != model {self.model.everything()!r}"


    class PromptPrefixAgainstModel(RuleBasedStateMachine):
        """pfx.PromptPrefix (chunk 1, keep_min from pfx.KEEP_MIN at call time) against the same model."""

        def __init__(self):
            super().__init__()
            self.saved_keep_min = pfx.KEEP_MIN
            pfx.KEEP_MIN = 2
            self.prefix, self.model = pfx.PromptPrefix(), Model()
            self.model.configure(bool(pfx.TF_PREFIX_CACHE), 2, 1)

        def teardown(self):
            pfx.KEEP_MIN = self.saved_keep_min

        @rule(keep_min=st.integers(0, 5))
        def set_keep_min(self, keep_min):
            pfx.KEEP_MIN = keep_min  # read at the next offset_for, as the original class reads it

        @rule(prompt=PROMPTS)
        def offset_for(self, prompt):
            self.model.configure(self.model.enabled, pfx.KEEP_MIN, 1)
            assert self.prefix.offset_for(prompt) == self.model.query(prompt)[0]

        @rule(ids=PROMPTS, past=st.integers(0, 2))
        def record(self, ids, past):
            canonical_end = len(ids) - min(past, len(ids)) if past < 2 else len(ids) + 1
            expected = self.model.record(ids, canonical_end)
            try:
                self.prefix.record(ids, canonical_end)
                answer = None
            except pfx.Refused as refused:
                answer = refused.refusal
            assert answer == expected, f"record answered {answer!r}, the model {expected!r}"

        @rule()
        def clear(self):
            self.prefix.clear()
            self.model.clear()

        @rule(enabled=st.booleans())
        def set_enabled(self, enabled):
            self.prefix.enabled = enabled
            self.model.configure(enabled, self.model.keep_min, 1)

        @invariant()
        def attributes_are_the_models(self):
            held = (list(self.prefix.ids), self.prefix.canonical_end, self.prefix.enabled)
            model = (self.model.ids, self.model.canonical_end, self.model.enabled)
            assert held == model, f"PromptPrefix {held!r} != model {model!r}"




def step_model(keep_min: int, chunk: int, prefill_step: int, held: list, canonical_end: int, prompt: list) -> tuple:
    """pfx.decide with reuse on, from docs/spec.md's definitions alone: the largest offset k below
    len(prompt) that is at most lcp(held, prompt) and canonical_end, a multiple of chunk and, with a
    prefill step s, leaves a resume whose last step of s tokens is one token alone exactly when the
    cold run's is; found by trying every k. Then keep_min. Returns (offset, reason name)."""
    def last_step_alone(tokens: int) -> bool:  # the steps are [0, s), [s, 2s), ...: (t - 1) % s == 0
        return (tokens - 1) % prefill_step == 0

    lcp = next((i for i, (a, b) in enumerate(zip(held, prompt)) if a != b), min(len(held), len(prompt)))
    best = 0
    for k in range(len(prompt)):
        keeps = prefill_step == 0 or last_step_alone(len(prompt) - k) == last_step_alone(len(prompt))
        if k <= lcp and k <= canonical_end and k % chunk == 0 and keeps:
            best = k
    if best == 0:
        return (0, "nothing_reusable")
    return (best, "reused") if best >= keep_min else (0, "below_keep_min")


if not WHY_NOT:
    LENGTHS = st.integers(0, 60)

    @st.composite
    def step_cases(draw):
        """A record and a prompt near it, of lengths around multiples of the step; the knobs."""
        prefill_step = draw(STEPS)
        chunk = draw(st.one_of(st.integers(1, 6), st.just(prefill_step or 1), st.sampled_from([2**32, 2**64 - 1])))
        length = draw(LENGTHS)
        if 0 < prefill_step <= 30 and draw(st.booleans()):
            length = prefill_step * draw(st.integers(0, 60 // prefill_step)) + draw(st.integers(0, 2))
        held = draw(st.lists(TOKENS, min_size=0, max_size=60))
        kept = draw(st.integers(0, len(held)))
        kept = min(kept, length)
        prompt = held[:kept] + draw(st.lists(TOKENS, min_size=length - kept, max_size=length - kept))
        canonical_end = draw(st.integers(0, len(held)))
        keep_min = draw(st.one_of(st.integers(0, 8), st.just(2**64 - 1)))
        return keep_min, chunk, prefill_step, held, canonical_end, prompt


@unittest.skipIf(bool(WHY_NOT), WHY_NOT)
class PyPrefillStep(unittest.TestCase):
    @verifies("PY-3 INV-4 INV-7 INV-12")
    def test_decide_is_the_model_of_the_prefill_step(self):
        @seed(SEED)
        @settings(max_examples=EXAMPLES * 10, deadline=None, database=None, print_blob=True)
        @given(step_cases())
        def decide_is_the_model(case):
            keep_min, chunk, prefill_step, held, canonical_end, prompt = case
            config = pfx.Config(keep_min=keep_min, chunk=chunk, prefill_step=prefill_step)
            decision = pfx.decide(config, held, canonical_end, prompt)
            expected = step_model(keep_min, chunk, prefill_step, held, canonical_end, prompt) if held else (
                0, "empty_record")
            assert (decision.offset, decision.reason.name) == expected, (
                f"pfx.decide answered {decision!r}, the model {expected!r}")
            # The same decision through a machine that holds the record (INV-12 on query too).
            machine = pfx.Machine(config)
            machine.record(held, canonical_end)
            assert machine.query(prompt) == decision

        decide_is_the_model()

    @verifies("PY-3 INV-4 INV-12")
    def test_keep_min_judges_the_offset_the_step_leaves(self):
        # docs/engines.md's vLLM example: chunk 32, steps of 256, a 97-token prompt held whole is
        # resumed at 64, not 96; keep_min 65 refuses those 64 rows though the 96 would have passed.
        prompt = list(range(97))
        held = prompt + [7]
        taken = pfx.decide(pfx.Config(keep_min=64, chunk=32, prefill_step=256), held, 97, prompt)
        self.assertEqual((taken.offset, taken.reason, taken.bound), (64, pfx.Reason.reused, pfx.Bound.prefill_step))
        refused = pfx.decide(pfx.Config(keep_min=65, chunk=32, prefill_step=256), held, 97, prompt)
        self.assertEqual((refused.offset, refused.reason, refused.bound),
                         (0, pfx.Reason.below_keep_min, pfx.Bound.prefill_step))
        no_step = pfx.decide(pfx.Config(keep_min=65, chunk=32), held, 97, prompt)
        self.assertEqual(no_step.offset, 96)


@unittest.skipIf(bool(WHY_NOT), WHY_NOT)
class StatefulTest(unittest.TestCase):
    @verifies("PY-3 INV-1 INV-2 INV-3 INV-4 INV-5 INV-6 INV-7 INV-8 INV-9 INV-10")
    def test_machine_follows_the_model_through_any_sequence_of_events(self):
        run_state_machine_as_test(seed(SEED)(MachineAgainstModel), settings=SETTINGS)

    @verifies("PY-1 SEED-1")
    def test_prompt_prefix_follows_the_model_through_any_sequence_of_calls(self):
        run_state_machine_as_test(seed(SEED)(PromptPrefixAgainstModel), settings=SETTINGS)


if __name__ == "__main__":
    unittest.main()
