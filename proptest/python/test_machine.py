"""pfx.Machine: every event, every refusal, the argument errors, and random protocol runs compared
with a small model written here from docs/spec.md ("The rule", "The protocol", "Refusals")."""
from __future__ import annotations

import unittest

import pfx
from support import SEED, rng, verifies

MESSAGES = {  # the core's describe(refusal)
    "writing": "a request is being written: commit or abort it first",
    "not writing": "no request is being written: begin one first",
    "offset not granted": "offset is neither 0 nor the offset the rule grants for this prompt",
    "canonical_end past ids": "canonical_end is past the end of ids",
    "ids not begun prompt": "ids do not start with the prompt given to begin",
    "canonical_end past prompt": "canonical_end is past the prompt given to begin: rows from there on were "
                                 "written by decode",
    "chunk zero": "chunk must be at least 1",
}


# Settings a 32-bit truncation would wrap to small values (2^32 -> 0, 2^32 + 1 -> 1), and the top of the
# 64-bit range.
FULL_WIDTH = (2**32 - 1, 2**32, 2**32 + 1, 2**64 - 2, 2**64 - 1)

# Admission paddings: none half the time, a few draft tokens' rows, and the top of the range (only whether
# it is 0 changes the rule, so one that wrapped to 0 would show).
ADMISSION_PADDINGS = (0, 0, 0, 1, 3, 2**64 - 1)


def everything(machine: pfx.Machine) -> tuple:
    return (machine.config, machine.ids, machine.canonical_end, machine.phase, machine.begin_offset)


def alone(tokens: int, prefill_step: int) -> bool:
    """Whether prefilling `tokens` (>= 1) tokens in steps of `prefill_step` ends with a step of one token
    alone (docs/spec.md, "The rule"): the steps are [0, s), [s, 2s), ..., the last one holds token
    tokens - 1."""
    return (tokens - 1) % prefill_step == 0


def alone_resumed(tokens: int, prefill_step: int, admission_padding: int) -> bool:
    """Whether a resume leaving `tokens` (>= 1) tokens ends with a step of one token alone: an engine that
    pads an admission leaving one token computes it with 1 + admission_padding rows (docs/spec.md)."""
    return alone(tokens, prefill_step) and not (admission_padding != 0 and tokens == 1)


def model_decide(enabled, keep_min, chunk, ids, canonical_end, prompt, prefill_step=0, admission_padding=0,
                 decode_rows_exact=False) -> tuple:
    """The rule, straight from docs/spec.md: (offset, common_prefix, reason, bound)."""
    if not enabled:
        return (0, 0, "disabled", "none")
    if not ids:
        return (0, 0, "empty_record", "none")
    lcp = 0
    while lcp < min(len(ids), len(prompt)) and ids[lcp] == prompt[lcp]:
        lcp += 1
    # The tightest bound; min() keeps the first on a tie, the earlier in the spec's table.
    # INV-2: rows decode wrote are offered only when the engine writes them as a cold prefill does.
    offerable = len(ids) if decode_rows_exact else canonical_end
    reusable, bound = min([(lcp, "common_prefix"), (offerable, "canonical_end"),
                           (max(len(prompt) - 1, 0), "one_token_left")], key=lambda b: b[0])
    if reusable % chunk:
        reusable, bound = reusable - reusable % chunk, "alignment"
    if prefill_step and reusable:
        # INV-12: down the chunk grid until a resume ends with a one-token step exactly when the cold
        # run does (0 always does); keep_min judges what is left.
        stepped = reusable
        while stepped > 0 and (alone_resumed(len(prompt) - stepped, prefill_step, admission_padding)
                               != alone(len(prompt), prefill_step)):
            stepped -= chunk
        if stepped < reusable:
            reusable, bound = stepped, "prefill_step"
    if reusable == 0:
        return (0, lcp, "nothing_reusable", bound)
    if reusable < keep_min:
        return (0, lcp, "below_keep_min", bound)
    return (reusable, lcp, "reused", bound)


class Model:
    """The protocol of docs/spec.md. Each event returns a decision tuple, None, or the refusal's name."""

    def __init__(self):
        self.enabled, self.keep_min, self.chunk, self.prefill_step = True, 64, 1, 0
        self.admission_padding, self.decode_rows_exact = 0, False
        self.ids, self.canonical_end, self.writing, self.begin_offset = [], 0, False, 0
        self.begun, self.tainted = [], False

    def decide(self, prompt):
        return model_decide(self.enabled, self.keep_min, self.chunk, self.ids, self.canonical_end, prompt,
                            self.prefill_step, self.admission_padding, self.decode_rows_exact)

    def query(self, prompt):
        return "writing" if self.writing else self.decide(prompt)

    def begin(self, prompt, offset):
        if self.writing:
            return "writing"
        decision = self.decide(prompt)
        if offset not in (0, decision[0]):
            return "offset not granted"
        self.ids, self.canonical_end = self.ids[:offset], min(self.canonical_end, offset)
        self.writing, self.begin_offset = True, offset
        self.begun, self.tainted = list(prompt), False
        return decision

    def commit(self, ids, canonical_end):
        if not self.writing:
            return "not writing"
        if canonical_end > len(ids):
            return "canonical_end past ids"
        if list(ids[:len(self.begun)]) != self.begun:
            return "ids not begun prompt"
        if canonical_end > len(self.begun):
            return "canonical_end past prompt"
        if self.enabled and not self.tainted:
            self.ids, self.canonical_end = list(ids), canonical_end
        self.writing, self.begin_offset, self.begun = False, 0, []
        return None

    def abort(self):
        if not self.writing:
            return "not writing"
        self.writing, self.begin_offset, self.begun = False, 0, []
        return None

    def record(self, ids, canonical_end):
        if self.writing:
            return "writing"
        if canonical_end > len(ids):
            return "canonical_end past ids"
        if self.enabled:
            self.ids, self.canonical_end = list(ids), canonical_end
        return None

    def clear(self):
        self.ids, self.canonical_end = [], 0
        self.tainted = self.writing  # a clear during a write: its commit stores nothing
        return None

    def configure(self, enabled, keep_min, chunk, prefill_step=0, admission_padding=0, decode_rows_exact=False):
        if self.writing:
            return "writing"
        if chunk == 0:
            return "chunk zero"
        regrid = chunk != self.chunk  # a new prefill step or padding keeps the record: the grid is the same
        # Decode rows exact or not: the held rows were written by an engine said to be otherwise.
        refact = decode_rows_exact != self.decode_rows_exact
        self.enabled, self.keep_min, self.chunk, self.prefill_step = enabled, keep_min, chunk, prefill_step
        self.admission_padding, self.decode_rows_exact = admission_padding, decode_rows_exact
        if not enabled or regrid or refact:
            self.clear()
        return None

    def everything(self):
        return (pfx.Config(enabled=self.enabled, keep_min=self.keep_min, chunk=self.chunk,
                           prefill_step=self.prefill_step, admission_padding=self.admission_padding,
                           decode_rows_exact=self.decode_rows_exact), self.ids,
                self.canonical_end, pfx.Phase.writing if self.writing else pfx.Phase.idle, self.begin_offset)


def outcome(call):
    """What the machine answered, in the model's terms."""
    try:
        answer = call()
    except pfx.Refused as refused:
        if str(refused) != MESSAGES[refused.refusal]:
            raise AssertionError(f"Refused says {str(refused)!r} for {refused.refusal!r}")
        return refused.refusal
    if answer is None:
        return None
    return (answer.offset, answer.common_prefix, answer.reason.name, answer.bound.name)


def random_event(r, model: Model):
    """(description, call on a machine, call on the model): mostly valid, sometimes not."""
    def tokens(n):
        return [r.randrange(3) for _ in range(n)]

    def prompt():
        return (model.ids[:r.randrange(len(model.ids) + 1)] if r.random() < 0.7 else []) + tokens(r.randrange(8))

    kind = r.choices(["query", "begin", "commit", "abort", "record", "clear", "configure"],
                     weights=[3, 4, 4, 1, 2, 1, 1])[0]
    if kind in ("query", "begin"):
        p = prompt()
        if kind == "query":
            return f"query({p})", lambda m: m.query(p), lambda: model.query(p)
        granted = model.decide(p)[0]
        offset = r.choice([0, granted, granted, granted + 1, r.randrange(len(p) + 2)])
        return f"begin({p}, {offset})", lambda m: m.begin(p, offset), lambda: model.begin(p, offset)
    if kind in ("commit", "record"):
        held = model.begun if model.writing and kind == "commit" else model.ids
        base = list(held) if r.random() < 0.8 else tokens(r.randrange(6))
        ids = base + tokens(r.randrange(10))
        end = r.choice([len(ids), r.randrange(len(ids) + 1), len(ids) + 1, model.begin_offset])
        call = getattr(model, kind)
        return f"{kind}({ids}, {end})", lambda m: getattr(m, kind)(ids, end), lambda: call(ids, end)
    if kind == "configure":
        enabled, keep_min, chunk = r.random() < 0.85, r.randrange(5), r.choice([0, 1, 1, 2, 3])
        if r.random() < 0.1:  # full width: a keep_min above any prompt, a chunk above any offset
            keep_min = r.choice(FULL_WIDTH)
        if r.random() < 0.1:
            chunk = r.choice(FULL_WIDTH)
        # A prefill step of every kind: none, 1, small, the chunk's, or one step whatever the length.
        step = r.choice([0, 0, 0, 1, 2, 3, 5, chunk, 2**32, 2**64 - 1])
        padding = r.choice(ADMISSION_PADDINGS)
        exact = r.random() < 0.5
        return (f"configure(Config({enabled}, {keep_min}, {chunk}, prefill_step={step}, admission_padding={padding}, "
                f"decode_rows_exact={exact}))",
                lambda m: m.configure(pfx.Config(enabled=enabled, keep_min=keep_min, chunk=chunk, prefill_step=step,
                                                 admission_padding=padding, decode_rows_exact=exact)),
                lambda: model.configure(enabled, keep_min, chunk, step, padding, exact))
    return f"{kind}()", lambda m: getattr(m, kind)(), getattr(model, kind)


def run_protocol(r, events: int, log: list, machine_type=pfx.Machine) -> None:
    machine, model = machine_type(pfx.Config(keep_min=0)), Model()
    model.keep_min = 0
    for _ in range(events):
        description, on_machine, on_model = random_event(r, model)
        log.append(description)
        got, expected = outcome(lambda: on_machine(machine)), on_model()
        if got != expected:
            raise AssertionError(f"{description} answered {got}, the model {expected}")
        if everything(machine) != model.everything():
            raise AssertionError(f"after {description} the machine holds {everything(machine)}, "
                                 f"the model {model.everything()}")


class PyMachine(unittest.TestCase):
    @verifies("PY-3 INV-8")
    def test_serves_a_request_through_every_event(self):
        machine = pfx.Machine(pfx.Config(enabled=True, keep_min=4, chunk=2))
        machine.reserve(64)
        self.assertGreaterEqual(machine.capacity, 64)
        prompt = [1, 2, 3, 4, 5, 6, 7]
        self.assertEqual(machine.query(prompt), pfx.Decision(offset=0, common_prefix=0,
                                                             reason=pfx.Reason.empty_record, bound=pfx.Bound.none))
        machine.begin(prompt, 0)
        self.assertEqual(machine.phase, pfx.Phase.writing)
        machine.commit(prompt + [8, 9], len(prompt))
        self.assertEqual((machine.ids, machine.canonical_end, machine.phase), (prompt + [8, 9], 7, pfx.Phase.idle))

        follow_up = prompt + [8, 9, 10]  # repeats the answer, whose rows decode wrote
        decision = machine.query(follow_up)
        self.assertEqual((decision.offset, decision.common_prefix, decision.reason, decision.bound),
                         (6, 9, pfx.Reason.reused, pfx.Bound.alignment))
        self.assertEqual(machine.begin(follow_up, decision.offset), decision)
        # INV-8: while the request is written the record claims only the rows it keeps.
        self.assertEqual((machine.ids, machine.canonical_end, machine.begin_offset), (prompt[:6], 6, 6))
        machine.abort()
        self.assertEqual((machine.ids, machine.canonical_end, machine.phase), (prompt[:6], 6, pfx.Phase.idle))

        machine.record(range(10), 8)
        self.assertEqual((machine.ids, machine.canonical_end), (list(range(10)), 8))
        machine.begin([0, 1, 2], 0)
        machine.clear()  # any phase
        self.assertEqual((machine.ids, machine.canonical_end, machine.phase), ([], 0, pfx.Phase.writing))
        machine.abort()
        machine.record(range(10), 8)
        machine.configure(pfx.Config(enabled=False))
        self.assertEqual((machine.ids, machine.config), ([], pfx.Config(enabled=False, keep_min=64, chunk=1)))
        # 4 bytes per token of the record and of the begun prompt, both reserved to 64.
        self.assertEqual(machine.memory_bytes - 8 * machine.capacity, pfx.Machine().memory_bytes)
        self.assertIn("Phase.idle", repr(machine))

    @verifies("PY-3 INV-9 INV-10")
    def test_refuses_each_event_the_spec_refuses_and_changes_nothing(self):
        idle = pfx.Machine(pfx.Config(keep_min=2))
        idle.record([1, 2, 3, 4], 4)
        writing = pfx.Machine(pfx.Config(keep_min=2))
        writing.record([1, 2, 3, 4], 4)
        writing.begin([1, 2, 3, 9], 3)
        cases = [
            (writing, lambda m: m.query([1]), "writing"),
            (writing, lambda m: m.begin([1], 0), "writing"),
            (idle, lambda m: m.begin([1, 2, 3, 9], 2), "offset not granted"),
            (idle, lambda m: m.commit([1], 1), "not writing"),
            (writing, lambda m: m.commit([1, 2, 3], 4), "canonical_end past ids"),
            (writing, lambda m: m.commit([1, 2, 3, 5], 4), "ids not begun prompt"),
            (writing, lambda m: m.commit([1, 2, 7, 9], 4), "ids not begun prompt"),
            (writing, lambda m: m.commit([1, 2], 2), "ids not begun prompt"),
            (writing, lambda m: m.commit([1, 2, 3, 9, 4], 5), "canonical_end past prompt"),
            (idle, lambda m: m.abort(), "not writing"),
            (writing, lambda m: m.record([1], 1), "writing"),
            (idle, lambda m: m.record([1], 2), "canonical_end past ids"),
            (writing, lambda m: m.configure(pfx.Config()), "writing"),
            (idle, lambda m: m.configure(pfx.Config(chunk=0)), "chunk zero"),
        ]
        for machine, call, refusal in cases:
            before = everything(machine)
            with self.assertRaises(pfx.Refused) as raised:
                call(machine)
            self.assertEqual((raised.exception.refusal, str(raised.exception)), (refusal, MESSAGES[refusal]))
            self.assertIsInstance(raised.exception, ValueError)
            self.assertEqual(everything(machine), before, refusal)
        with self.assertRaises(pfx.Refused) as raised:
            pfx.Machine(pfx.Config(chunk=0))
        self.assertEqual(raised.exception.refusal, "chunk zero")

    @verifies("PY-3 INV-8 INV-10")
    def test_runs_random_protocols_as_the_spec_model(self):
        r = rng(self)
        for _ in range(300):
            log = []
            try:
                run_protocol(r, 30, log)
            except AssertionError as error:
                calls = "\n  ".join(log)
                self.fail(f"{error}\nPFX_PY_SEED={SEED}\nevents:\n  {calls}")

    @verifies("PY-3")
    def test_the_protocol_comparison_can_fail(self):
        class ClearKeepsTheRecord(pfx.Machine):
            def clear(self):
                pass

        r = rng(self)
        caught = 0
        for _ in range(50):
            try:
                run_protocol(r, 30, [], ClearKeepsTheRecord)
            except AssertionError:
                caught += 1
        self.assertGreater(caught, 10)

    @verifies("PY-3 INV-2 INV-12")
    def test_decide_answers_as_the_machine(self):
        r = rng(self)
        for _ in range(500):
            config = pfx.Config(enabled=r.random() < 0.9, keep_min=r.randrange(4), chunk=r.randrange(1, 4),
                                prefill_step=r.choice([0, 0, 1, 2, 3, 4, 2**64 - 1]),
                                admission_padding=r.choice(ADMISSION_PADDINGS), decode_rows_exact=r.random() < 0.5)
            ids = [r.randrange(2) for _ in range(r.randrange(8))]
            end = r.randrange(len(ids) + 1)
            prompt = [r.randrange(2) for _ in range(r.randrange(9))]
            machine = pfx.Machine(config)
            machine.record(ids, end)
            decision = pfx.decide(config, ids, end, prompt)
            self.assertEqual(decision, machine.query(prompt))
            self.assertEqual((decision.offset, decision.common_prefix, decision.reason.name, decision.bound.name),
                             model_decide(config.enabled, config.keep_min, config.chunk, ids, end, prompt,
                                          config.prefill_step, config.admission_padding, config.decode_rows_exact))
        with self.assertRaises(pfx.Refused):
            pfx.decide(pfx.Config(chunk=0), [1], 1, [1, 2])
        self.assertEqual(pfx.common_prefix([1, 2, 3], (1, 2, 4)), 2)

    @verifies("PY-3")
    def test_accepts_any_iterable_of_integer_token_ids(self):
        class Index:  # as numpy's integers do
            def __init__(self, value):
                self.value = value

            def __index__(self):
                return self.value

        expected = list(range(70))
        for ids in (expected, tuple(expected), range(70), (i for i in expected), map(Index, expected)):
            machine = pfx.Machine()
            machine.record(ids, 70)
            self.assertEqual(machine.ids, expected)
            self.assertEqual(machine.query(iter(expected + [1])).offset, 70)

    @verifies("PY-3 INV-10")
    def test_names_the_argument_and_index_of_a_bad_value(self):
        machine = pfx.Machine()
        machine.record([1, 2, 3], 3)
        before = everything(machine)
        cases = [
            (lambda: machine.query([1, 2, 3, 2**40]), ValueError,
             "prompt[3]: expected a token id (an integer in 0..2147483647), got 1099511627776"),
            (lambda: machine.query([1, 2, -1]), ValueError,
             "prompt[2]: expected a token id (an integer in 0..2147483647), got -1"),
            (lambda: machine.query([1, "2"]), TypeError,
             "prompt[1]: expected a token id (an integer in 0..2147483647), got str ('2')"),
            (lambda: machine.query(5), TypeError, "prompt must be a sequence of token ids, not int"),
            (lambda: machine.query(None), TypeError, "prompt must be a sequence of token ids, not NoneType"),
            (lambda: machine.begin([1], -1), ValueError, "offset must be >= 0, not -1"),
            (lambda: machine.begin([1], 1.0), TypeError, "offset must be an integer, not float (1.0)"),
            (lambda: machine.record([1, 2.5], 1), TypeError,
             "ids[1]: expected a token id (an integer in 0..2147483647), got float (2.5)"),
            (lambda: machine.record([1], 2**64), OverflowError, "canonical_end: 18446744073709551616 does not fit 64 bits"),
            (lambda: machine.configure({"chunk": 1}), TypeError, "config must be a pfx.Config, not dict"),
            (lambda: pfx.Machine(3), TypeError, "config must be a pfx.Config, not int"),
            (lambda: pfx.Config(enabled=1), TypeError, "enabled must be True or False, not int (1)"),
            (lambda: pfx.Config(keep_min=-1), ValueError, "keep_min must be >= 0, not -1"),
            (lambda: pfx.Config(chunk="2"), TypeError, "chunk must be an integer, not str ('2')"),
            (lambda: pfx.Config(prefill_step=-1), ValueError, "prefill_step must be >= 0, not -1"),
            (lambda: pfx.Config(prefill_step=None), TypeError, "prefill_step must be an integer, not NoneType (None)"),
            (lambda: pfx.Config(admission_padding=-1), ValueError, "admission_padding must be >= 0, not -1"),
            (lambda: pfx.Decision(reason=1), TypeError, "reason must be a pfx.Reason, not int"),
        ]
        for call, error, message in cases:
            with self.assertRaises(error) as raised:
                call()
            self.assertEqual(str(raised.exception), message)
            self.assertNotIn("incompatible function arguments", str(raised.exception))
            self.assertEqual(everything(machine), before, message)

    @verifies("PY-3")
    def test_config_and_decision_are_values(self):
        config = pfx.Config(keep_min=8, chunk=4)
        self.assertEqual((config.enabled, config.keep_min, config.chunk), (True, 8, 4))
        self.assertEqual(config, pfx.Config(True, 8, 4))
        self.assertNotEqual(config, pfx.Config())
        self.assertEqual(repr(config), "Config(enabled=True, keep_min=8, chunk=4, prefill_step=0, admission_padding=0, "
                                       "decode_rows_exact=False)")
        config.chunk = 2
        self.assertEqual(config.chunk, 2)
        config.prefill_step = 256
        self.assertEqual((config.prefill_step, repr(config)),
                         (256, "Config(enabled=True, keep_min=8, chunk=2, prefill_step=256, admission_padding=0, "
                               "decode_rows_exact=False)"))
        self.assertNotEqual(config, pfx.Config(True, 8, 2))
        self.assertEqual(config, pfx.Config(True, 8, 2, 256))
        config.admission_padding = 3
        self.assertEqual((config.admission_padding, repr(config)),
                         (3, "Config(enabled=True, keep_min=8, chunk=2, prefill_step=256, admission_padding=3, "
                             "decode_rows_exact=False)"))
        self.assertNotEqual(config, pfx.Config(True, 8, 2, 256))
        self.assertEqual(config, pfx.Config(True, 8, 2, 256, 3))
        self.assertEqual(config, pfx.Config(keep_min=8, chunk=2, prefill_step=256, admission_padding=3))
        self.assertEqual(pfx.Config().admission_padding, 0)
        config.decode_rows_exact = True
        self.assertEqual((config.decode_rows_exact, repr(config)),
                         (True, "Config(enabled=True, keep_min=8, chunk=2, prefill_step=256, admission_padding=3, "
                                "decode_rows_exact=True)"))
        self.assertNotEqual(config, pfx.Config(True, 8, 2, 256, 3))
        self.assertEqual(config, pfx.Config(True, 8, 2, 256, 3, True))
        self.assertFalse(pfx.Config().decode_rows_exact)
        import copy
        for copied in (copy.copy(config), copy.deepcopy(config)):  # a value: every field, and apart
            self.assertEqual(copied, config)
            copied.chunk = 7
            self.assertEqual(config.chunk, 2)
        machine = pfx.Machine(config)
        machine.config.keep_min = 99  # a copy
        self.assertEqual(machine.config.keep_min, 8)
        decision = pfx.Decision(offset=3, common_prefix=5, reason=pfx.Reason.reused, bound=pfx.Bound.one_token_left)
        self.assertEqual(repr(decision),
                         "Decision(offset=3, common_prefix=5, reason=Reason.reused, bound=Bound.one_token_left)")
        self.assertEqual([r.name for r in pfx.Reason.__members__.values()],
                         ["reused", "disabled", "empty_record", "nothing_reusable", "below_keep_min"])
        self.assertEqual([b.name for b in pfx.Bound.__members__.values()],
                         ["none", "common_prefix", "canonical_end", "one_token_left", "alignment", "prefill_step"])

    @verifies("PY-3 INV-2 INV-11")
    def test_decode_rows_exact_grants_rows_decode_wrote_and_a_change_of_it_forgets_the_record(self):
        # 12 ids, the last 4 decode wrote (canonical_end 8), on grid 4: a prompt that keeps all 12 is
        # resumed at 8 without the premise and at 12 with it; either change of it forgets the record.
        prompt = list(range(15))
        for exact, offset, bound in ((False, 8, pfx.Bound.canonical_end), (True, 12, pfx.Bound.common_prefix)):
            config = pfx.Config(keep_min=2, chunk=4, decode_rows_exact=exact)
            self.assertEqual(pfx.decide(config, list(range(12)), 8, prompt),
                             pfx.Decision(offset, 12, pfx.Reason.reused, bound))
            machine = pfx.Machine(config)
            machine.record(list(range(12)), 8)
            self.assertEqual(machine.query(prompt).offset, offset)
            machine.configure(pfx.Config(keep_min=2, chunk=4, decode_rows_exact=not exact))
            self.assertEqual((list(machine.ids), machine.canonical_end), ([], 0))
        for bad in (1, "yes", None):
            with self.assertRaises(TypeError):
                pfx.Config(decode_rows_exact=bad)

    @verifies("PY-3 INV-12")
    def test_decide_follows_the_admission_padding(self):
        # docs/spec.md's examples, chunk 32 and steps of 256, with the padding of an engine speculating
        # 3 draft tokens: the 97-token prompt's cold run does not end alone, and its padded resume at 96
        # computes 4 rows, so it is kept (unpadded: 64); the 257-token one's does, and its padded resume
        # at 256 would not, so it falls to the multiple of lcm(32, 256) below: 0 (unpadded: 256).
        for n, unpadded, padded, bound in ((97, 64, 96, pfx.Bound.one_token_left),
                                           (257, 256, 0, pfx.Bound.prefill_step)):
            prompt = list(range(n))
            held = prompt + [7]
            plain = pfx.Config(keep_min=0, chunk=32, prefill_step=256)
            speculating = pfx.Config(keep_min=0, chunk=32, prefill_step=256, admission_padding=3)
            self.assertEqual(pfx.decide(plain, held, n, prompt).offset, unpadded, n)
            decision = pfx.decide(speculating, held, n, prompt)
            self.assertEqual((decision.offset, decision.bound), (padded, bound), n)
            machine = pfx.Machine(plain)
            machine.record(held, n)
            machine.configure(speculating)  # a new padding keeps the record: the grid is the same
            self.assertEqual((machine.ids, machine.query(prompt)), (held, decision), n)
            # Without a prefill step the padding is no premise.
            self.assertEqual(pfx.decide(pfx.Config(keep_min=0, chunk=32, admission_padding=3), held, n, prompt).offset,
                             n - 1 - (n - 1) % 32, n)

    @verifies("PY-3 INV-4 INV-5")
    def test_full_width_settings_act_at_full_width_or_are_refused(self):
        held, prompt = list(range(40)), list(range(40)) + [7]
        for value in FULL_WIDTH:
            config = pfx.Config(keep_min=value, chunk=value)
            self.assertEqual((config.keep_min, config.chunk), (value, value))
            # keep_min above anything reusable: never reuse, for the full-width reason.
            machine = pfx.Machine(pfx.Config(keep_min=value, chunk=1))
            machine.record(held, len(held))
            self.assertEqual(machine.config.keep_min, value)
            decision = machine.query(prompt)
            self.assertEqual((decision.offset, decision.reason), (0, pfx.Reason.below_keep_min), value)
            # A chunk above the prompt aligns everything to 0.
            machine = pfx.Machine(pfx.Config(keep_min=0, chunk=value))
            machine.record(held, len(held))
            decision = machine.query(prompt)
            self.assertEqual((decision.offset, decision.reason, decision.bound),
                             (0, pfx.Reason.nothing_reusable, pfx.Bound.alignment), value)
            self.assertEqual(pfx.decide(pfx.Config(keep_min=value), held, len(held), prompt).offset, 0)
            # A prefill step at full width acts as one: the cold run of 41 tokens does not end alone
            # in steps this long, so a resume must not either: 40 falls a chunk, to 39.
            stepped = pfx.decide(pfx.Config(keep_min=0, prefill_step=value), held, len(held), prompt)
            self.assertEqual((stepped.offset, stepped.bound), (39, pfx.Bound.prefill_step), value)
            # A full-width admission padding acts as one too: the resume at 40 is admitted with more
            # than one row, not its last token alone, so it is kept (the caps tie at 40: the first
            # is named).
            padded = pfx.decide(pfx.Config(keep_min=0, prefill_step=value, admission_padding=value), held, len(held),
                                prompt)
            self.assertEqual((padded.offset, padded.bound), (40, pfx.Bound.common_prefix), value)
        for name in ("keep_min", "chunk", "prefill_step", "admission_padding"):
            with self.assertRaises(OverflowError) as raised:
                pfx.Config(**{name: 2**64})
            self.assertEqual(str(raised.exception), f"{name}: 18446744073709551616 does not fit 64 bits")


if __name__ == "__main__":
    unittest.main()
