"""pfx.integrations.llama_cpp.enable: pfx's rule in charge of the prefix reuse of llama-cpp-python's
own Llama, on the model pfx.fixtures.tiny_gguf writes (PFX_LLAMA_MODEL).

Properties (hypothesis) serve random chats through create_completion on Llamas of random n_ubatch,
n_batch, chunk, keep_min and flash attention: every response, tokens and logprobs, equals a cold run
(a stock Llama of the same settings, reset() before each call), and the prompt tokens llama.cpp's own
counters say it evaluated are exactly what the rule leaves, computed here from docs/spec.md; the
same chats through stock Llamas differ. Examples pin how the record follows the context (reset,
failed and interrupted calls, saved states and prompt caches, embeddings, changes by hand), that the
rest of llama-cpp-python is served as without pfx, and every refusal.

Each test is skipped, with the reason, when llama_cpp cannot be imported or no model is given. The
run's seed is printed; PFX_PY_SEED=<seed> replays it, PFX_PY_EXAMPLES=<n> runs more chats.
"""
from __future__ import annotations

import contextlib
import os
import random
import tempfile
import unittest
from typing import NamedTuple, Optional

from hypothesis import HealthCheck, given, seed, settings, strategies as st

from support import SEED, rng, verifies, why_not_llama

MODEL = os.environ.get("PFX_LLAMA_MODEL", "")
WHY_NOT = why_not_llama()
if not WHY_NOT:
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    import pfx
    from pfx.fixtures import llama_chats
    from pfx.fixtures.workloads import chat_workload
    from pfx.integrations import llama_cpp as adapter

EXAMPLES = int(os.environ.get("PFX_PY_EXAMPLES") or 40)
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def make(n_ubatch: int = 32, n_batch: int = 512, n_ctx: int = 1024, flash_attn: bool = False, **more):
    """A Llama on the model, one thread (ggml's barriers spin on a busy machine; results do not depend
    on threads: docs/engines.md), logits of every row (for logprobs), counters warmed up."""
    llm = llama_cpp.Llama(MODEL, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_ubatch, n_threads=1, n_threads_batch=1,
                          logits_all=True, flash_attn=flash_attn, verbose=False, **more)
    llama_chats.warm_up(llm)
    return llm


def alone(t: int, step: int) -> bool:
    """INV-12's alone(t) (docs/spec.md): a prefill of t tokens in steps of `step` ends with a step of
    one token."""
    return (t - 1) % step == 0


def allowed(held: list, canonical_end: int, prompt: list, chunk: int, keep_min: int, step: int = 0) -> int:
    """docs/spec.md's offset(prompt), written here from its definitions, not with pfx's code:
    0 when nothing is held; else n = align_down(min(lcp(ids, prompt), canonical_end, len(prompt) - 1),
    chunk), lowered by whole chunks while, with a prefill step, the resumed prefill's last step is one
    token and the cold run's is not, or the other way round (INV-12, the largest such: INV-7), when
    n >= keep_min; 0 otherwise."""
    if not held:
        return 0
    common = 0
    while common < min(len(held), len(prompt)) and held[common] == prompt[common]:
        common += 1
    n = max(0, min(common, canonical_end, len(prompt) - 1))
    n -= n % chunk
    while step and n > 0 and alone(len(prompt) - n, step) != alone(len(prompt), step):
        n -= chunk
    return n if n >= keep_min else 0


def prefill_end(length: int, step: int) -> int:
    """The canonical_end a prefill of `length` tokens leaves: docs/spec.md, "THM-1 with a one-token
    step": a lane commits len(P) - 1 when alone(len(P)), since a longer prompt computes that row in a
    longer step."""
    return length - 1 if step and alone(length, step) else length


def grid_of(n_batch: int, n_ubatch: int) -> int:
    """Where a resume keeps every ubatch where a cold run has it (docs/engines.md): llama-cpp-python
    evaluates a prompt's rest in calls of n_batch tokens from the offset, llama.cpp splits each call
    into ubatches of n_ubatch rows from its start."""
    return n_ubatch if n_batch % n_ubatch == 0 else n_batch


def rule_of(n_batch: int, n_ubatch: int, flash_attn: bool, chunk: Optional[int]) -> tuple:
    """(chunk, prefill step) enable takes (docs/engines.md, "Turning the rule on"): a chunk given, on
    the grid, with no step; else with flash attention off and n_ubatch dividing n_batch chunk 1 and
    the step n_ubatch (only a one-row ubatch computes a row otherwise, and only a prefill's last
    ubatch can be short), otherwise the grid with no step."""
    if chunk is None and not flash_attn and n_batch % n_ubatch == 0:
        return 1, n_ubatch
    return chunk or grid_of(n_batch, n_ubatch), 0


DEFAULT_CHUNK, DEFAULT_STEP = rule_of(512, 32, False, None)  # make()'s: n_batch 512, n_ubatch 32, flash off


class Record:
    """What the test expects pfx to hold: the last prompt whose prefill completed."""

    def __init__(self, step: int = 0) -> None:
        self.ids, self.end, self.step = [], 0, step

    def served(self, prompt) -> None:
        self.ids, self.end = list(prompt), prefill_end(len(prompt), self.step)

    def cut(self, offset: int) -> None:
        self.ids, self.end = self.ids[:offset], min(self.end, offset)


def outcome(result) -> tuple:
    """What a completion answers, less its id and time: choices (text, logprobs, finish reason), usage."""
    return result["choices"], result.get("usage")


def served(llm, prompt, **arguments) -> tuple:
    """(outcome, prompt tokens llama.cpp evaluated) of create_completion(prompt, **arguments)."""
    before = llama_chats.counters(llm)
    result = llm.create_completion(prompt, **arguments)
    return outcome(result), llama_chats.prompt_tokens_evaluated(llm, before, len(prompt))


def streamed(llm, prompt, chunks: Optional[int] = None, **arguments) -> tuple:
    """(each chunk's choices, prompt tokens evaluated) of a stream; closed after `chunks` chunks when given."""
    before = llama_chats.counters(llm)
    stream = llm.create_completion(prompt, stream=True, **arguments)
    got = []
    for chunk in stream:
        got.append(chunk["choices"])
        if len(got) == chunks:
            break
    stream.close()
    return got, llama_chats.prompt_tokens_evaluated(llm, before, len(prompt))


def cold(reference, prompt, chunks: Optional[int] = None, stream: bool = False, **arguments):
    """The cold run: a stock Llama of the same settings, reset, then the same call."""
    reference.reset()
    if stream:
        return streamed(reference, prompt, chunks, **arguments)[0]
    return outcome(reference.create_completion(prompt, **arguments))


GREEDY = dict(temperature=0.0, logprobs=1)


class Served(NamedTuple):
    kind: str
    prompt_length: int
    expected: int     # the offset the rule allows (the test's own computation)
    evaluated: int    # prompt tokens llama.cpp evaluated
    decided: int      # the offset pfx decided (LlamaRule.last), or -1 without pfx
    differs: bool


def serve_chat(llm, reference, next_prompt, kinds, chunk: int, keep_min: int, max_tokens: int,
               r: random.Random, step: int = 0) -> list:
    """Serves one chat on `llm` and compares each response with its cold run on `reference`. Kinds:
    "complete", "stream", "interrupt" (a stream closed after one to three chunks), "reset"."""
    record, response, steps = Record(step), None, []
    arguments = dict(GREEDY, max_tokens=max_tokens)
    for kind in kinds:
        if kind == "reset":
            llm.reset()
            record = Record(step)
            continue
        prompt = next_prompt(response)
        expected = allowed(record.ids, record.end, prompt, chunk, keep_min, step)
        if kind == "complete":
            got, evaluated = served(llm, prompt, **arguments)
            want = cold(reference, prompt, **arguments)
        else:
            chunks = r.randrange(1, 4) if kind == "interrupt" else None
            got, evaluated = streamed(llm, prompt, chunks, **arguments)
            want = cold(reference, prompt, chunks, stream=True, **arguments)
        rule = vars(llm).get("_pfx_rule")
        steps.append(Served(kind, len(prompt), expected, evaluated, rule.last.offset if rule else -1, got != want))
        record.served(prompt)
        response = llama_chats.held_response(llm, prompt)
    return steps


def chat_of_steps(seed_value: int):
    """pfx.fixtures.workloads' chats: turns, regenerations, edits, new sessions, shorter prompts."""
    next_step = chat_workload(random.Random(seed_value))
    return lambda response: list(next_step(response).prompt)


@st.composite
def contexts(draw):
    """n_ubatch, n_batch (its multiples, and one that is not), the chunk (None: the default), keep_min,
    flash attention."""
    n_ubatch = draw(st.sampled_from([8, 16, 32, 64, 128]))
    n_batch = draw(st.sampled_from([512, n_ubatch, 2 * n_ubatch, n_ubatch + n_ubatch // 2]))
    grid = grid_of(n_batch, n_ubatch)
    chunk = draw(st.sampled_from([None, grid, 2 * grid]))
    keep_min = draw(st.one_of(st.just(0), st.integers(0, 3 * grid)))
    return dict(n_ubatch=n_ubatch, n_batch=n_batch, chunk=chunk, keep_min=keep_min, flash_attn=draw(st.booleans()))


def edge_chat(r: random.Random, n_ubatch: int, targets: list):
    """A chat whose turns are made to land where a ubatch of one row decides (flash attention off,
    n_ubatch dividing n_batch). The first prompt has 2 to 149 tokens; each next one is the last one, its
    response and new tokens, as many as its target says: "one row left": the resume at the last prompt's end (chunk 1's offset without
    the prefill step) would leave a last ubatch of one row; "ends alone": the prompt's own last ubatch
    is one row (so its row may not be offered to the turns after it); "free": 1 to 40."""
    state = {"prompt": None, "targets": iter(targets)}

    def fresh(n):
        return [r.randrange(3, 512) for _ in range(n)]

    def new_tokens(target: str, before: int, extension: int) -> int:
        """How many new tokens after `before` held ones and `extension` tokens of response."""
        if target == "one row left":
            wanted = (1 - extension) % n_ubatch  # (extension + x) % n_ubatch == 1
        elif target == "ends alone":
            wanted = (1 - before - extension) % n_ubatch  # (before + extension + x) % n_ubatch == 1
        else:
            return r.randrange(1, 41)
        return wanted or n_ubatch

    def next_prompt(response):
        target, prompt = next(state["targets"]), state["prompt"]
        if prompt is None:
            prompt = fresh(r.randrange(2, 150))
        else:
            prompt = prompt + list(response) + fresh(new_tokens(target, len(prompt), len(response)))
        state["prompt"] = prompt
        return prompt

    return next_prompt


def describe(steps: list) -> str:
    return "\n".join(f"  {i}: {s}" for i, s in enumerate(steps))


@unittest.skipIf(WHY_NOT, WHY_NOT)
class ExactReuse(unittest.TestCase):
    """With the rule on, every resumed response equals its cold run, and reuses what the rule allows."""

    def assert_served_as_the_rule_allows(self, steps: list) -> None:
        """Every response equals its cold run, pfx decided the offset the test computed, and llama.cpp
        evaluated the rest of the prompt, by its own counters."""
        for step in steps:
            self.assertFalse(step.differs, f"a response differs from its cold run:\n{describe(steps)}")
            self.assertEqual(step.decided, step.expected, f"pfx decided another offset:\n{describe(steps)}")
            self.assertEqual(step.evaluated, step.prompt_length - step.expected,
                             f"llama.cpp evaluated another number of prompt tokens:\n{describe(steps)}")

    @verifies("LLAMA-1 THM-1 INV-1 INV-2 INV-3 INV-4 INV-5")
    @seed(SEED)
    @PROPERTY
    @given(context=contexts(), chat=st.integers(0, 2**32 - 1),
           kinds=st.lists(st.sampled_from(["complete"] * 4 + ["stream", "interrupt", "reset"]), min_size=2, max_size=6),
           max_tokens=st.integers(1, 20))
    def test_every_response_equals_its_cold_run_and_reuses_what_the_rule_allows(self, context, chat, kinds, max_tokens):
        context = dict(context)
        chunk, keep_min = context.pop("chunk"), context.pop("keep_min")
        with contextlib.closing(make(**context)) as llm, contextlib.closing(make(**context)) as reference:
            rule = adapter.enable(llm, chunk=chunk, keep_min=keep_min)
            grid = grid_of(context["n_batch"], context["n_ubatch"])
            expected_chunk, step = rule_of(context["n_batch"], context["n_ubatch"], context["flash_attn"], chunk)
            self.assertEqual((rule.grid, rule.chunk, rule.prefill_step), (grid, expected_chunk, step))
            steps = serve_chat(llm, reference, chat_of_steps(chat), kinds, expected_chunk, keep_min, max_tokens,
                               random.Random(chat), step)
        self.assert_served_as_the_rule_allows(steps)

    @verifies("LLAMA-1 THM-1 INV-12")
    @seed(SEED)
    @settings(PROPERTY, max_examples=max(EXAMPLES // 2, 1))
    @given(n_ubatch=st.sampled_from([8, 16, 32, 64, 128]), calls=st.sampled_from([1, 2, 0]),
           chat=st.integers(0, 2**32 - 1), max_tokens=st.integers(1, 20),
           targets=st.lists(st.sampled_from(["one row left", "ends alone", "free"]), max_size=2))
    def test_resumes_around_a_one_row_last_ubatch_equal_their_cold_runs(self, n_ubatch, calls, chat, max_tokens,
                                                                        targets):
        # Flash attention off and n_ubatch dividing n_batch (n_ubatch itself, twice it, or 512): the rule
        # is chunk 1 with the prefill step n_ubatch. The second turn would leave chunk 1's resume a last
        # ubatch of one row where the cold run's is longer, and a rule without the prefill step differs
        # there; the third ends with a one-row ubatch, and the fourth extends it: the row the record
        # leaves out.
        n_batch = n_ubatch * calls if calls else 512
        with contextlib.closing(make(n_ubatch, n_batch)) as llm, contextlib.closing(make(n_ubatch, n_batch)) as reference:
            rule = adapter.enable(llm)
            self.assertEqual((rule.chunk, rule.prefill_step), (1, n_ubatch))
            turns = ["free", "one row left", "ends alone", "free"] + targets
            steps = serve_chat(llm, reference, edge_chat(random.Random(chat), n_ubatch, turns), ["complete"] * len(turns),
                               1, 0, max_tokens, random.Random(chat), n_ubatch)
        self.assert_served_as_the_rule_allows(steps)

    @verifies("LLAMA-1 CEX-1")
    def test_stock_llama_serves_resumed_turns_that_differ_from_their_cold_runs(self):
        # The same harness as the property, on stock Llamas (the suite can fail): llama-cpp-python's own
        # reuse takes rows that decode wrote and resumes off the ubatch grid. pfx's reuse of the same
        # chats is measured beside it, by llama.cpp's counters.
        for n_ubatch in (32, 128):
            totals = {"stock": [0, 0, 0], "pfx": [0, 0, 0]}  # resumed turns, differing, prompt tokens not evaluated
            for chat in range(3):
                for name in totals:
                    with contextlib.closing(make(n_ubatch)) as llm, contextlib.closing(make(n_ubatch)) as reference:
                        if name == "pfx":
                            adapter.enable(llm)
                        next_prompt = llama_chats.turns(random.Random(f"{SEED}:{chat}"))
                        chunk, step = rule_of(512, n_ubatch, False, None)
                        steps = serve_chat(llm, reference, next_prompt, ["complete"] * 4, chunk, 0, 20,
                                           random.Random(chat), step)
                    for step in steps[1:]:
                        totals[name][0] += 1
                        totals[name][1] += step.differs
                        totals[name][2] += step.prompt_length - step.evaluated
            print(f"n_ubatch {n_ubatch}: stock Llama: {totals['stock'][1]} of {totals['stock'][0]} resumed turns "
                  f"differ from cold, {totals['stock'][2]} prompt tokens not evaluated; with pfx: "
                  f"{totals['pfx'][1]} differ, {totals['pfx'][2]} not evaluated")
            self.assertGreater(totals["stock"][1], 0, f"n_ubatch {n_ubatch}: no stock response differed")
            self.assertEqual(totals["pfx"][1], 0)
            self.assertGreaterEqual(2 * totals["pfx"][2], totals["stock"][2], "pfx kept less than half of stock's reuse")

    @verifies("LLAMA-1")
    def test_the_default_rule_is_what_llama_cpp_resumes_exactly_on(self):
        for n_batch, n_ubatch, flash_attn, chunk, step in ((512, 32, False, 1, 32), (512, 128, False, 1, 128),
                                                           (64, 64, False, 1, 64), (96, 64, False, 96, 0),
                                                           (48, 32, False, 48, 0), (512, 32, True, 32, 0),
                                                           (96, 64, True, 96, 0)):
            with self.subTest(n_batch=n_batch, n_ubatch=n_ubatch, flash_attn=flash_attn), \
                    contextlib.closing(make(n_ubatch, n_batch, flash_attn=flash_attn)) as llm:
                grid = grid_of(n_batch, n_ubatch)
                rule = adapter.enable(llm)
                self.assertEqual((rule.n_batch, rule.n_ubatch, rule.grid, rule.chunk, rule.prefill_step),
                                 (n_batch, n_ubatch, grid, chunk, step))
                self.assertEqual((rule.machine.config.chunk, rule.machine.config.prefill_step), (chunk, step))
                self.assertEqual(adapter.exact_grid(n_batch, n_ubatch), grid)
                adapter.disable(llm)
                rule = adapter.enable(llm, chunk=grid)  # a chunk given is taken as it is, with no step
                self.assertEqual((rule.chunk, rule.prefill_step), (grid, 0))
        # Flash attention auto (a context made otherwise than through Llama's flash_attn, which asks on or
        # off): llama.cpp does not say what it resolved to, and the grid holds either way.
        with contextlib.closing(make()) as llm:
            llm.context_params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO
            rule = adapter.enable(llm)
            self.assertEqual((rule.chunk, rule.prefill_step), (32, 0))


def chat_steps(llm, reference, prompts_and_expected, test):
    """Serves each (prompt, expected offset) on `llm`, each compared with its cold run."""
    for prompt, expected in prompts_and_expected:
        got, evaluated = served(llm, prompt, max_tokens=8, **GREEDY)
        test.assertEqual(got, cold(reference, prompt, max_tokens=8, **GREEDY))
        test.assertEqual(evaluated, len(prompt) - expected)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class TheRecordFollowsTheContext(unittest.TestCase):
    """Every way the context changes, the record follows: what pfx lets generate keep is always rows
    a prefill on the grid wrote for the same tokens."""

    def setUp(self):
        self.r = rng(self)

    def tokens(self, n: int) -> list:
        return [self.r.randrange(3, 512) for _ in range(n)]

    @contextlib.contextmanager
    def pair(self, n_ubatch: int = 32, **more):
        with contextlib.closing(make(n_ubatch, **more)) as llm, contextlib.closing(make(n_ubatch, **more)) as reference:
            self.rule = adapter.enable(llm)
            yield llm, reference

    def next_turn(self, llm, prompt, new: int = 40) -> list:
        return prompt + llama_chats.held_response(llm, prompt) + self.tokens(new)

    @staticmethod
    def expect(held: list, prompt: list, end: Optional[int] = None) -> int:
        """The offset make()'s default rule allows `prompt` when the record is `held`, whose prefill
        completed (canonical_end: prefill_end), or cut at `end`."""
        end = prefill_end(len(held), DEFAULT_STEP) if end is None else end
        return allowed(held, end, prompt, DEFAULT_CHUNK, 0, DEFAULT_STEP)

    @verifies("LLAMA-2")
    def test_reset_forgets_the_record(self):
        with self.pair() as (llm, reference):
            first = self.tokens(150)
            chat_steps(llm, reference, [(first, 0)], self)
            llm.reset()
            self.assertEqual(self.rule.machine.canonical_end, 0)
            chat_steps(llm, reference, [(self.next_turn(llm, first), 0)], self)

    @verifies("LLAMA-2 INV-8")
    def test_a_prefill_that_fails_keeps_only_the_rows_before_its_offset(self):
        # A prompt longer than the context, through generate itself (create_completion refuses it first):
        # llama_decode fails after the rows below the offset were kept.
        with self.pair(n_ctx=256) as (llm, reference):
            first = self.tokens(100)
            chat_steps(llm, reference, [(first, 0)], self)
            longer = first[:90] + self.tokens(310)
            offset = self.expect(first, longer)
            self.assertLess(offset, 100)
            generator = llm.generate(longer, temp=0.0)
            with self.assertRaises(RuntimeError):
                next(generator)
            self.assertEqual((self.rule.last.offset, self.rule.machine.canonical_end), (offset, offset))
            following = first + self.tokens(20)
            chat_steps(llm, reference, [(following, self.expect(first, following, offset))], self)

    @verifies("LLAMA-2")
    def test_a_prompt_longer_than_the_context_is_refused_and_changes_nothing(self):
        with self.pair(n_ctx=256) as (llm, reference):
            first = self.tokens(100)
            chat_steps(llm, reference, [(first, 0)], self)
            with self.assertRaises(ValueError):
                llm.create_completion(first + self.tokens(200), max_tokens=4)
            following = self.next_turn(llm, first, 20)
            chat_steps(llm, reference, [(following, self.expect(first, following))], self)

    @verifies("LLAMA-2")
    def test_a_call_that_fails_or_stops_after_its_prefill_keeps_the_prompt_rows(self):
        def fail(input_ids, logits):  # called after each token is sampled, the first one included
            if len(input_ids) >= prompt_length:
                raise KeyError("a stopping criterion that fails")
            return False

        with self.pair() as (llm, reference):
            prompt = self.tokens(120)
            prompt_length = len(prompt)
            with self.assertRaises(KeyError):
                llm.create_completion(prompt, max_tokens=10, stopping_criteria=llama_cpp.StoppingCriteriaList([fail]),
                                      **GREEDY)
            following = self.next_turn(llm, prompt)
            chat_steps(llm, reference, [(following, self.expect(prompt, following))], self)
            # A generator made and dropped before its first token changes nothing.
            llm.generate(self.tokens(50), temp=0.0).close()
            again = self.next_turn(llm, following)
            chat_steps(llm, reference, [(again, self.expect(following, again))], self)

    @verifies("LLAMA-2")
    def test_a_saved_state_brings_its_record_back_where_its_rows_are_the_same(self):
        with self.pair() as (llm, reference):
            x, y = self.tokens(150), self.tokens(150)
            chat_steps(llm, reference, [(x, 0)], self)
            state = llm.save_state()
            x_next = self.next_turn(llm, x)
            chat_steps(llm, reference, [(y, 0)], self)
            llm.load_state(state)
            chat_steps(llm, reference, [(x_next, self.expect(x, x_next))], self)
            self.assertGreater(self.rule.last.offset, 0)
            # Another Llama with the same settings takes the record with the state; one whose rows are
            # computed otherwise (another n_ubatch), or a state saved without pfx, starts cold.
            for n_ubatch, enabled_when_saved, expected in ((32, True, self.expect(x, x_next)),
                                                           (16, True, 0), (32, False, 0)):
                with contextlib.closing(make(n_ubatch)) as other, contextlib.closing(make(n_ubatch)) as other_reference:
                    saved = state
                    if not enabled_when_saved:
                        with contextlib.closing(make(32)) as stock:
                            stock.create_completion(x, max_tokens=8, **GREEDY)
                            saved = stock.save_state()
                    adapter.enable(other)
                    other.load_state(saved)
                    with self.subTest(n_ubatch=n_ubatch, enabled_when_saved=enabled_when_saved):
                        chat_steps(other, other_reference, [(x_next, expected)], self)

    @verifies("LLAMA-2")
    def test_the_prompt_caches_stay_exact_and_reuse_through_their_saved_states(self):
        for name in ("LlamaRAMCache", "LlamaDiskCache"):
            with self.subTest(cache=name), tempfile.TemporaryDirectory() as folder, self.pair() as (llm, reference):
                llm.set_cache(llama_cpp.LlamaRAMCache() if name == "LlamaRAMCache" else llama_cpp.LlamaDiskCache(folder))
                chats = {"x": self.tokens(140), "y": self.tokens(140)}
                held = {}  # each chat's last prompt, whose state the cache keeps
                for turn in range(3):
                    for chat, prompt in chats.items():
                        expected = self.expect(held[chat], prompt) if chat in held else 0
                        with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):  # LlamaDiskCache prints
                            chat_steps(llm, reference, [(prompt, expected)], self)
                        if turn:
                            self.assertGreater(expected, 0)  # each chat's turn came back through the cache
                        held[chat] = prompt
                        chats[chat] = self.next_turn(llm, prompt)

    @verifies("LLAMA-2")
    def test_an_embedding_forgets_the_record_even_when_it_fails(self):
        # embed clears the context before it decodes, and resets Llama only when it succeeds: a failed
        # one leaves stock llama-cpp-python reusing rows it no longer holds.
        with contextlib.closing(make(embedding=True)) as stock, self.pair(embedding=True) as (llm, reference):
            texts = ["x " * 300, "y " * 300, "z " * 600]  # about 300, 300 and 600 tokens; n_batch 512
            self.assertEqual(llm.create_embedding(texts[:2]), stock.create_embedding(texts[:2]))
            first = self.tokens(150)
            following = self.next_turn(llm, first)
            for served_llm in (llm, stock):
                served_llm.reset()
                served_llm.create_completion(first, max_tokens=8, **GREEDY)
                with self.assertRaises(ValueError):  # the first text decoded, the third longer than n_batch
                    served_llm.embed(texts, truncate=False)
            chat_steps(llm, reference, [(following, 0)], self)
            self.assertNotEqual(outcome(stock.create_completion(following, max_tokens=8, **GREEDY)),
                                cold(reference, following, max_tokens=8, **GREEDY))

    @verifies("LLAMA-2")
    def test_rows_changed_by_hand_shrink_the_record_to_what_still_holds(self):
        # With flash attention and ubatches of 64, a row computed off the grid differs from a cold one:
        # the same tokens evaluated again from row 20 leave pfx only the rows below 20.
        with self.pair(n_ubatch=64, flash_attn=True) as (llm, reference):
            first = self.tokens(200)
            chat_steps(llm, reference, [(first, 0)], self)
            llm.n_tokens = 20
            llm.eval(first[20:])
            self.assertEqual(self.rule.machine.canonical_end, 20)
            following = first + self.tokens(30)
            chat_steps(llm, reference, [(following, 0)], self)
            llm.input_ids[70] = (following[70] + 1) % 512  # a held id changed: rows from 70 on are not the record's
            chat_steps(llm, reference, [(following + self.tokens(5), 64)], self)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class TheRestIsServedAsWithoutPfx(unittest.TestCase):
    """Sampling, grammars, chat formats, speculative decoding and embeddings: what llama-cpp-python
    does with them is unchanged, and resumed answers equal cold ones."""

    def setUp(self):
        self.r = rng(self)

    @verifies("LLAMA-1")
    def test_chat_completions_resume_exactly(self):
        with contextlib.closing(make()) as llm, contextlib.closing(make()) as reference:
            rule = adapter.enable(llm)
            messages = [{"role": "system", "content": "you are terse"},
                        {"role": "user", "content": "tell me a story about a cat and a dog " * 3}]
            for turn in range(3):
                arguments = dict(max_tokens=12, temperature=0.0, logprobs=True, top_logprobs=1)
                answer = llm.create_chat_completion(messages, **arguments)
                reference.reset()
                self.assertEqual(answer["choices"], reference.create_chat_completion(messages, **arguments)["choices"])
                if turn:
                    self.assertGreater(rule.last.offset, 0)
                messages += [answer["choices"][0]["message"], {"role": "user", "content": "and then? " * (turn + 2)}]

    @verifies("LLAMA-1")
    def test_grammars_and_sampling_with_a_seed_resume_exactly(self):
        grammar = llama_cpp.LlamaGrammar.from_string('root ::= [a-z ]+', verbose=False)
        with contextlib.closing(make()) as llm, contextlib.closing(make()) as reference:
            adapter.enable(llm)
            prompt = [self.r.randrange(3, 512) for _ in range(120)]
            for arguments in (dict(grammar=grammar, **GREEDY), dict(temperature=0.9, top_k=20, seed=7, logprobs=2)):
                for _ in range(2):
                    answer = outcome(llm.create_completion(prompt, max_tokens=10, **arguments))
                    self.assertEqual(answer, cold(reference, prompt, max_tokens=10, **arguments))
                    prompt = prompt + llama_chats.held_response(llm, prompt) + [self.r.randrange(3, 512) for _ in range(40)]

    @verifies("LLAMA-1")
    def test_speculative_decoding_resumes_exactly(self):
        with contextlib.closing(make(draft_model=LlamaPromptLookupDecoding(num_pred_tokens=3))) as llm, \
                contextlib.closing(make(draft_model=LlamaPromptLookupDecoding(num_pred_tokens=3))) as reference:
            adapter.enable(llm)
            prompt = [self.r.randrange(3, 512) for _ in range(60)] * 2  # repeats: the draft finds matches
            for _ in range(3):
                answer = outcome(llm.create_completion(prompt, max_tokens=12, **GREEDY))
                self.assertEqual(answer, cold(reference, prompt, max_tokens=12, **GREEDY))
                prompt = prompt + llama_chats.held_response(llm, prompt) + prompt[:30]

    @verifies("LLAMA-1")
    def test_other_llamas_stay_stock_and_disable_gives_the_stock_reuse_back(self):
        with contextlib.closing(make()) as llm, contextlib.closing(make()) as other:
            adapter.enable(llm)
            self.assertIsNot(llm.generate, other.generate)
            self.assertEqual(other.generate.__func__, llama_cpp.Llama.generate)
            adapter.disable(llm)
            for name in ("generate", "eval", "reset", "save_state", "load_state", "embed"):
                self.assertNotIn(name, vars(llm))
            prompt = [self.r.randrange(3, 512) for _ in range(100)]
            llm.create_completion(prompt, max_tokens=8, **GREEDY)
            following = prompt + llama_chats.held_response(llm, prompt) + [5, 6, 7]
            _, evaluated = served(llm, following, max_tokens=8, **GREEDY)
            self.assertEqual(evaluated, 3)  # stock reuse: every held row, decode's included
            adapter.enable(llm)  # and it may be enabled again


@unittest.skipIf(WHY_NOT, WHY_NOT)
class Refusals(unittest.TestCase):
    """What enable cannot vouch for is refused by name, and changes nothing."""

    @classmethod
    def setUpClass(cls):
        cls.llm = make()

    @classmethod
    def tearDownClass(cls):
        cls.llm.close()

    def refused(self, error, words, **arguments):
        try:
            with self.assertRaises(error) as caught:
                adapter.enable(self.llm, **arguments)
        finally:
            if "_pfx_rule" in vars(self.llm):  # taken: the class's other tests need it stock
                adapter.disable(self.llm)
        for word in words:
            self.assertIn(word, str(caught.exception))
        if error is pfx.Refused:  # the package's one refusal type, a RuntimeError as these were before it
            self.assertIsInstance(caught.exception, RuntimeError)
            self.assertIn(caught.exception.refusal, ("configuration", "untested version"))
        self.assertNotIn("_pfx_rule", vars(self.llm))
        self.assertNotIn("generate", vars(self.llm))
        return caught.exception

    @verifies("LLAMA-3")
    def test_bad_arguments_are_refused_naming_them(self):
        self.refused(ValueError, ["chunk 48", "grid 32", "n_batch 512", "n_ubatch 32"], chunk=48)
        self.refused(ValueError, ["chunk 0", "grid 32"], chunk=0)
        self.refused(ValueError, ["chunk must be >= 0, not -32"], chunk=-32)
        self.refused(TypeError, ["chunk must be None", "bool"], chunk=True)
        self.refused(TypeError, ["chunk must be None", "str"], chunk="32")
        self.refused(ValueError, ["keep_min must be an int >= 0, got -1"], keep_min=-1)
        self.refused(TypeError, ["keep_min", "float"], keep_min=1.5)
        with self.assertRaisesRegex(TypeError, "llm must be a llama_cpp.Llama, got str"):
            adapter.enable("model.gguf")
        with self.assertRaisesRegex(ValueError, "pfx's rule is not on for this Llama"):
            adapter.disable(self.llm)
        with self.assertRaisesRegex(ValueError, "pfx's rule is not on for this Llama"):
            adapter.decisions(self.llm)

    @verifies("LLAMA-3")
    def test_a_second_enable_on_the_same_llama_is_refused(self):
        rule = adapter.enable(self.llm, chunk=64)
        try:
            with self.assertRaisesRegex(RuntimeError, r"already on for this Llama \(LlamaRule\(chunk=64.*disable\(llm\) first"):
                adapter.enable(self.llm)
            self.assertIs(vars(self.llm)["_pfx_rule"], rule)
            with self.assertRaisesRegex(pfx.Refused, r"generate\(reset=False\)"):
                self.llm.generate([1, 2, 3], reset=False)
        finally:
            adapter.disable(self.llm)

    @verifies("LLAMA-3")
    def test_an_untested_llama_cpp_python_version_is_refused(self):
        version = llama_cpp.__version__
        llama_cpp.__version__ = "0.3.37"
        try:
            refusal = self.refused(pfx.Refused, ["tested with llama-cpp-python 0.3.36", "this is 0.3.37"])
            self.assertEqual(refusal.refusal, "untested version")
        finally:
            llama_cpp.__version__ = version

    @verifies("LLAMA-3")
    def test_what_pfx_cannot_vouch_for_is_refused_by_name(self):
        class Overriding(llama_cpp.Llama):
            def generate(self, tokens, **arguments):
                return super().generate(tokens, **arguments)

            def __del__(self):  # made without __init__ below: nothing to close
                pass

        with self.assertRaisesRegex(pfx.Refused, "Overriding overrides Llama.generate"):
            adapter.enable(Overriding.__new__(Overriding))
        from llama_cpp import llama_chat_format

        cases = [("chat_handler", llama_chat_format.Llava15ChatHandler.__new__(llama_chat_format.Llava15ChatHandler),
                  "the chat handler Llava15ChatHandler writes image and audio rows into the context"),
                 ("_is_recurrent", True, "recurrent or hybrid"),
                 ("_is_hybrid", True, "recurrent or hybrid")]
        for attribute, value, words in cases:
            saved = getattr(self.llm, attribute)
            setattr(self.llm, attribute, value)
            try:
                self.assertEqual(self.refused(pfx.Refused, [words]).refusal, "configuration")
            finally:
                setattr(self.llm, attribute, saved)
        for function, answer, words, layers in (("llama_model_n_swa", 128, "sliding-window attention", 0),
                                                ("llama_supports_gpu_offload", True, "5 layers offloaded to a GPU", 5)):
            saved, saved_layers = getattr(llama_cpp, function), self.llm.model_params.n_gpu_layers
            setattr(llama_cpp, function, lambda *_: answer)
            self.llm.model_params.n_gpu_layers = layers
            try:
                self.assertEqual(self.refused(pfx.Refused, [words]).refusal, "configuration")
            finally:
                setattr(llama_cpp, function, saved)
                self.llm.model_params.n_gpu_layers = saved_layers
        original = self.llm.generate
        self.llm.generate = lambda *arguments, **keywords: original(*arguments, **keywords)
        try:
            self.refused_instance_method()
        finally:
            del self.llm.generate

    def refused_instance_method(self):
        with self.assertRaisesRegex(pfx.Refused, "generate is already replaced on the object itself"):
            adapter.enable(self.llm)
        self.assertNotIn("_pfx_rule", vars(self.llm))
