"""pfx.Lane and pfx.verify over engines written in Python, of both forms (docs/python.md, "Engines"), and
pfx.conform's premises (docs/conform.md, "Premises"), on engines in plain Python whose answer is known:
a lane with reuse answers bit for bit as one without it on the engine's grid and not off it; verify
passes there, fails off the grid, and fails when it compared nothing; a degenerate engine is called
degenerate, naming the premise. Needs no numpy."""
from __future__ import annotations

import array
import importlib
import importlib.util
import os
import struct
import subprocess
import sys
import unittest
import warnings

import pfx
from support import rng, verifies


class OwnedCache:
    """An engine that owns its cache, as llama.cpp and transformers do: a list of rows it appends to.
    A row depends on its token, the row before it and its place in the call's chunk, so a resume is
    exact only on multiples of `chunk`; the cache refuses a write that does not continue it."""
    vocab = 16

    def __init__(self, chunk, readable=True):
        self.chunk = chunk
        self.rows: list[float] = []
        if not readable:
            self.read_rows = None

    def prefill(self, tokens, start):
        if len(self.rows) != start:
            raise ValueError(f"the cache holds {len(self.rows)} rows, a write from {start}")
        for i, t in enumerate(tokens):
            before = self.rows[-1] if self.rows else 0.0
            self.rows.append(struct.unpack("f", struct.pack("f", 0.5 * before + t + 0.125 * i))[0])
        return self.logits()

    def decode(self, token, position):
        return self.prefill([token], position)

    def forget(self, position):
        del self.rows[position:]

    def read_rows(self, start, end):
        return struct.pack(f"{end - start}f", *self.rows[start:end])

    def logits(self):
        last = self.rows[-1]
        return array.array("f", [((j * 7 + int(last * 8)) % 13) + last for j in range(self.vocab)])


class HostRows:
    """An engine that writes pfx's KV state (the older form), with no decode of its own: pfx decodes
    with a one-token prefill. Exact only on multiples of `chunk`, as OwnedCache."""
    vocab, layers, width = 16, 1, 1

    def __init__(self, chunk):
        self.chunk = chunk

    def prefill(self, tokens, start, kv):
        for i, t in enumerate(tokens):
            before = kv[0, 0, start + i - 1, 0] if start + i > 0 else 0.0
            kv[0, 0, start + i, 0] = 0.5 * before + t + 0.125 * i
            kv[0, 1, start + i, 0] = t
        last = kv[0, 0, start + len(tokens) - 1, 0]
        return array.array("f", [((j * 7 + int(last * 8)) % 13) + last for j in range(self.vocab)])


def conversation(r, turns=6, vocab=16):
    """Multi-turn prompts: each turn the last prompt, the answer it got (filled in by serve), new tokens."""
    return [[r.randrange(vocab) for _ in range(r.randrange(3, 12))] for _ in range(turns)]


def serve_conversation(lane, turns, max_new_tokens=3):
    history, out = [], []
    for fresh in turns:
        prompt = history + fresh
        response = lane.serve(prompt, max_new_tokens)
        out.append((prompt, response))
        history = prompt + response.generated
    return out


class LaneOverPythonEngines(unittest.TestCase):
    @verifies("PY-4 DRV-8 THM-1")
    def test_a_lane_with_reuse_answers_as_one_without_it(self):
        r = rng(self)
        for make in (lambda c: OwnedCache(c), lambda c: HostRows(c)):
            for chunk in (1, 2, 4):
                turns = conversation(r)
                with self.subTest(engine=type(make(chunk)).__name__, chunk=chunk):
                    reused = serve_conversation(pfx.Lane(make(chunk), keep_min=chunk, capacity=256), turns)
                    cold = serve_conversation(pfx.Lane(make(chunk), keep_min=chunk, capacity=256, enabled=False), turns)
                    for (prompt, a), (prompt_cold, b) in zip(reused, cold):
                        self.assertEqual(prompt, prompt_cold)
                        self.assertEqual(a.generated, b.generated)
                        self.assertEqual(bytes(a.logits), bytes(b.logits))
                        self.assertEqual(b.decision.offset, 0)
                    self.assertGreater(sum(a.decision.offset for _, a in reused), 0)

    @verifies("PY-4")
    def test_a_response_holds_generated_tokens_float32_logits_and_the_decision(self):
        lane = pfx.Lane(OwnedCache(4), keep_min=4, capacity=64)
        first = lane.serve([1, 2, 3, 4, 5, 6], 2)
        self.assertEqual(len(first.generated), 2)
        view = memoryview(first.logits)
        self.assertEqual((view.format, view.itemsize, len(view)), ("f", 4, 16))
        self.assertEqual(first.decision.offset, 0)
        self.assertEqual(first.prefilled, 6)
        second = lane.serve([1, 2, 3, 4, 5, 6, 7, 8, 9], 0)
        self.assertEqual(second.decision.offset, 4)  # the rule's grid of 4
        self.assertEqual(second.generated, [])
        self.assertEqual(lane.held, [1, 2, 3, 4, 5, 6, 7, 8, 9])
        self.assertEqual((lane.chunk, lane.capacity, lane.keep_min, lane.enabled), (4, 64, 4, True))

    @verifies("PY-4 CEX-1")
    def test_the_rule_of_chunk_1_resumes_off_the_grid_and_differs(self):
        turns = conversation(rng(self), turns=8)
        off = serve_conversation(pfx.Lane(OwnedCache(4), keep_min=1, capacity=256, rule_chunk=1), turns)
        cold = serve_conversation(pfx.Lane(OwnedCache(4), keep_min=1, capacity=256, enabled=False), turns)
        self.assertTrue(any(bytes(a.logits) != bytes(b.logits) for (_, a), (_, b) in zip(off, cold)))

    @verifies("PY-4")
    def test_misuse_is_refused_with_a_message_that_names_it(self):
        class NoForm:
            chunk, vocab = 4, 16

            def prefill(self, tokens, start):
                return [0.0] * 16
        with self.assertRaisesRegex(TypeError, "no attribute 'layers'.*forget"):
            pfx.Lane(NoForm())
        small = OwnedCache(4)
        small.capacity = 32
        with self.assertRaisesRegex(Exception, "holds 32 rows"):
            pfx.Lane(small, capacity=64)
        lane = pfx.Lane(OwnedCache(4), capacity=64)
        with self.assertRaisesRegex(ValueError, "prompt"):
            lane.serve([], 1)
        with self.assertRaisesRegex(ValueError, "outside the vocabulary"):
            lane.serve([99], 1)
        # One engine's cache serves one lane at a time: a second lane takes it over, the first refuses.
        engine = OwnedCache(4)
        first = pfx.Lane(engine, keep_min=4, capacity=64)
        first.serve([1, 2, 3, 4, 5], 0)
        second = pfx.Lane(engine, keep_min=4, capacity=64)
        second.serve([1, 2, 3, 4, 5], 0)
        with self.assertRaisesRegex(RuntimeError, "given to another"):
            first.serve([1, 2, 3, 4, 5, 6], 0)
        # The engine's own error passes through, and the lane goes on.
        class Failing(OwnedCache):
            fail = True

            def prefill(self, tokens, start):
                if self.fail:
                    raise KeyError("the engine's own error")
                return super().prefill(tokens, start)
        failing = Failing(4)
        lane = pfx.Lane(failing, keep_min=4, capacity=64)
        with self.assertRaisesRegex(KeyError, "the engine's own error"):
            lane.serve([1, 2, 3], 0)
        failing.fail = False
        self.assertEqual(len(lane.serve([1, 2, 3], 0).logits), 16)


class Integrations(unittest.TestCase):
    @verifies("PY-4")
    def test_the_adapters_are_shipped_with_the_module(self):
        import pfx.integrations  # needs no framework: each adapter imports its own on demand
        folder = os.path.dirname(pfx.integrations.__file__)
        self.assertEqual(os.path.dirname(folder), os.path.dirname(pfx.__file__))
        self.assertTrue(os.path.isfile(os.path.join(folder, "transformers.py")))
        import pfx.fixtures  # the tests' and benchmarks' models and workloads ship beside them, apart
        fixtures = os.path.dirname(pfx.fixtures.__file__)
        self.assertEqual(os.path.dirname(fixtures), os.path.dirname(pfx.__file__))
        for name in ("tiny_gguf.py", "tiny_llama.py", "workloads.py", "original_prompt_prefix.py"):
            self.assertTrue(os.path.isfile(os.path.join(fixtures, name)), name)

    @verifies("PY-4")
    def test_old_module_names_are_aliases_that_warn_until_their_stated_removal(self):
        # Modules that moved (the fixtures, the vLLM checks) keep their old names, in one table: the old
        # name is the new module itself, and warns naming both and the version that removes it.
        from pfx.integrations import _aliases
        self.assertRegex(_aliases.REMOVED_IN, r"^\d+\.\d+\.\d+$")
        self.assertIn("pfx.integrations.tiny_llama", _aliases.ALIASES)
        self.assertIn("pfx.integrations.vllm_verify", _aliases.ALIASES)
        for old, new in _aliases.ALIASES.items():
            if old.endswith("tiny_gguf") and not all(importlib.util.find_spec(m) for m in ("gguf", "numpy")):
                continue  # the fixture itself needs them
            with self.subTest(old=old), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sys.modules.pop(old, None)
                alias = importlib.import_module(old)
                self.assertIs(alias, importlib.import_module(new))
                self.assertIn(f"{old} is now {new}; the old name is removed in pfx {_aliases.REMOVED_IN}",
                              [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)])

    @verifies("PY-4")
    def test_python_dash_m_on_an_old_name_runs_the_new_module_and_warns(self):
        # A module, and a package (the one server check, which the two engines' checks became), run by
        # its __main__.
        for old, new in (("pfx.integrations.tiny_llama", "pfx.fixtures.tiny_llama"),
                         ("pfx.integrations.llama_cpp.verify", "pfx.verify_server")):
            with self.subTest(old=old):
                ran = subprocess.run([sys.executable, "-m", old, "--help"], capture_output=True, text=True, timeout=120)
                self.assertEqual(ran.returncode, 0, ran.stderr)
                self.assertIn(f"usage: python -m {new}", ran.stdout)
                self.assertIn(f"DeprecationWarning: {old} is now {new}", ran.stderr)


class VerifyPythonEngines(unittest.TestCase):
    @verifies("DRV-9 PY-4")
    def test_verify_passes_on_the_grid_fails_off_it_and_fails_when_nothing_is_compared(self):
        r = rng(self)
        history, trace = [], []
        for fresh in conversation(r, turns=8):
            history = history + fresh + [r.randrange(16) for _ in range(3)]
            trace.append({"prompt": list(history), "max_new_tokens": 3})
        for make in (lambda: OwnedCache(4), lambda: HostRows(4)):
            with self.subTest(engine=type(make()).__name__):
                good = pfx.verify(make(), trace, keep_min=4, capacity=256)
                self.assertTrue(good.ok, str(good))
                self.assertTrue(good)
                self.assertEqual((good.requests, good.compared, good.mismatches), (8, 8, 0))
                self.assertGreater(good.reused_tokens, 0)
                self.assertGreater(good.rows_compared, 0)
                self.assertIsNone(good.first_mismatch)
                self.assertIn("(ok)", str(good))
                off = pfx.verify(make(), trace, keep_min=1, capacity=256, rule_chunk=1)
                self.assertFalse(off.ok)
                self.assertGreater(off.mismatches, 0)
                self.assertGreater(off.first_mismatch.request, 0)
                nothing = pfx.verify(make(), [], capacity=256)
                self.assertFalse(nothing.ok)
                self.assertEqual(nothing.compared, 0)
                self.assertIn("nothing was compared", str(nothing))
        # Without read_rows, rows are not compared; logits and tokens still are.
        blind = pfx.verify(OwnedCache(4, readable=False), trace, keep_min=4, capacity=256)
        self.assertTrue(blind.ok)
        self.assertEqual(blind.rows_compared, 0)

    @verifies("DRV-9")
    def test_verify_reads_each_row_from_one_read_each_row_call_where_the_engine_has_one(self):
        r = rng(self)
        trace = [[r.randrange(16) for _ in range(r.randrange(3, 40))] for _ in range(6)]

        class EachRow(OwnedCache):
            calls = 0

            def read_each_row(self, start, end):
                EachRow.calls += 1
                return [self.read_rows(p, p + 1) for p in range(start, end)]

        plain = pfx.verify(OwnedCache(4), trace, keep_min=4, capacity=256)
        each = pfx.verify(EachRow(4), trace, keep_min=4, capacity=256)
        self.assertTrue(each.ok)
        self.assertEqual((each.compared, each.rows_compared), (plain.compared, plain.rows_compared))
        self.assertEqual(EachRow.calls, 2 * len(trace))  # one call per response and per cold run
        # A resumed row that differs is found through read_each_row as through read_rows.
        off = pfx.verify(EachRow(4), trace, keep_min=1, capacity=256, rule_chunk=1)
        self.assertEqual(off.mismatches, pfx.verify(OwnedCache(4), trace, keep_min=1, capacity=256, rule_chunk=1).mismatches)

        class Wrong(OwnedCache):
            def __init__(self, answer):
                super().__init__(4)
                self.answer = answer

            def read_each_row(self, start, end):
                return self.answer(self, start, end)

        for answer, said in [(lambda e, a, b: [e.read_rows(a, b)], r"sequence .* a row \(7 rows\), got 1"),
                             (lambda e, a, b: e.read_rows(a, b), r"sequence .* a row \(7 rows\), got 28"),
                             (lambda e, a, b: 7, r"sequence .* a row \(7 rows\), not int"),
                             (lambda e, a, b: [1.5] * (b - a), r"sequence .* a row, not float")]:
            with self.subTest(said=said):  # the request fails, naming the problem: never a pass
                report = pfx.verify(Wrong(answer), [[1, 2, 3, 4, 5, 6, 7]], keep_min=4, capacity=64)
                self.assertFalse(report.ok)
                self.assertRegex(report.first_mismatch.what, "engine.read_each_row must return a " + said)

        class Empty(OwnedCache):  # reads nothing: an empty row would compare equal to any other
            def read_rows(self, start, end):
                return b""

        class EmptyEach(OwnedCache):
            def read_each_row(self, start, end):
                return [b""] * (end - start)

        for engine in [Empty(4), EmptyEach(4)]:
            with self.subTest(engine=type(engine).__name__):  # the request fails, naming the row: never a pass
                report = pfx.verify(engine, [[1, 2, 3, 4, 5, 6, 7]], keep_min=4, capacity=64)
                self.assertFalse(report.ok)
                self.assertRegex(report.first_mismatch.what, r"rows \[0, 7\) yielded row 0 with no bytes")

    @verifies("DRV-9")
    def test_a_trace_is_prompts_pairs_or_mappings(self):
        report = pfx.verify(OwnedCache(2), [[1, 2, 3], ([1, 2, 3, 4, 5], 2), {"prompt": [1, 2, 3, 4, 5, 6]}],
                            keep_min=2, capacity=64, max_new_tokens=1)
        self.assertEqual(report.compared, 3)
        self.assertTrue(report.ok)
        # Each item's own max_new_tokens is served (the call's is for items without one): the rows a
        # response vouches for are its prompt's and its decoded tokens' but the last.
        self.assertEqual(report.rows_compared, 3 + (5 + 1) + 6)
        with self.assertRaisesRegex(ValueError, r"trace\[0\] \(line 1\) has no \"prompt\""):
            pfx.verify(OwnedCache(2), [{"tokens": [1]}])
        with self.assertRaisesRegex(ValueError, r"trace\[1\]\[0\]"):
            pfx.verify(OwnedCache(2), [[1], [-1]])


class TraceAsTheProgramReadsIt(unittest.TestCase):
    """pfx.verify reads a trace as `pfx replay` does: the same items ({"op": "clear"} included), requests
    numbered from 1, lines from 1, and the first mismatch told in the program's words."""

    def turns(self):
        """A request, then one that resumes at 5, off the engine's grid of 4 under rule chunk 1."""
        return [{"prompt": [1, 2, 3, 4, 5], "max_new_tokens": 0, "label": "first"},
                {"prompt": [1, 2, 3, 4, 5, 6, 7], "max_new_tokens": 0, "label": "turn"}]

    @verifies("DRV-9")
    def test_the_first_mismatch_is_numbered_and_worded_as_pfx_replay_does(self):
        trace = [{"op": "clear"}] + self.turns()
        report = pfx.verify(OwnedCache(4), trace, keep_min=1, capacity=64, rule_chunk=1)
        self.assertEqual((report.requests, report.compared, report.mismatches), (2, 2, 1))
        first = report.first_mismatch
        self.assertEqual((first.request, first.line, first.label), (2, 3, "turn"))
        self.assertIn("MISMATCH: 1 response differs from its cold run; the first is request 2 (line 3, turn): ",
                      str(report))
        self.assertTrue(str(first).startswith("1 response differs from its cold run; the first is request 2 "
                                              "(line 3, turn): "), str(first))

    @verifies("DRV-9")
    def test_a_clear_forgets_the_record_before_the_next_request(self):
        kept = pfx.verify(OwnedCache(4), self.turns(), keep_min=1, capacity=64)
        cleared = pfx.verify(OwnedCache(4), [self.turns()[0], {"op": "clear"}, self.turns()[1]], keep_min=1,
                             capacity=64, rule_chunk=1)
        self.assertEqual(kept.reused_tokens, 4)
        self.assertTrue(cleared.ok, str(cleared))  # served cold: nothing resumed off the grid
        self.assertEqual(cleared.reused_tokens, 0)
        with self.assertRaisesRegex(ValueError, r'trace\[1\] \(line 2\): "op": expected "clear", got \'reset\''):
            pfx.verify(OwnedCache(4), [[1, 2], {"op": "reset"}])
        with self.assertRaisesRegex(ValueError, r'trace\[0\] \(line 1\): "prompt": a clear takes no request fields'):
            pfx.verify(OwnedCache(4), [{"op": "clear", "prompt": [1]}])
        with self.assertRaisesRegex(TypeError, r'trace\[0\] \(line 1\): "label" must be a str, not int'):
            pfx.verify(OwnedCache(4), [{"prompt": [1], "label": 3}])

    @verifies("DRV-9")
    def test_a_trace_file_is_read_as_pfx_replay_reads_it(self):
        import json
        import tempfile
        lines = ["", json.dumps({"op": "clear"})] + [json.dumps(t) for t in self.turns()]  # a blank line first
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "chats.jsonl")
            with open(path, "w", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
            for trace in (path, __import__("pathlib").Path(path)):
                report = pfx.verify(OwnedCache(4), trace, keep_min=1, capacity=64, rule_chunk=1)
                first = report.first_mismatch
                self.assertEqual((report.requests, first.request, first.line, first.label), (2, 2, 4, "turn"))
            with open(path, "a", encoding="utf-8") as out:
                out.write('{"prompt": [1, 2\n')
            with self.assertRaisesRegex(ValueError, r"pfx.verify: .*chats.jsonl:5: .*"):
                pfx.verify(OwnedCache(4), path)

    @verifies("DRV-9")
    def test_progress_is_told_run_by_run(self):
        told = []
        report = pfx.verify(OwnedCache(4), self.turns(), keep_min=1, capacity=64,
                            progress=lambda done, total: told.append((done, total)))
        self.assertTrue(report.ok)
        self.assertEqual(told, [(1, 4), (2, 4), (3, 4), (4, 4)])  # the lane's two responses, then two cold runs
        with self.assertRaisesRegex(TypeError, "pfx.verify: progress must be None"):
            pfx.verify(OwnedCache(4), self.turns(), progress=True)

    @verifies("DRV-9")
    def test_counts_of_one_are_in_the_singular(self):
        text = str(pfx.verify(OwnedCache(4), [[1, 2, 3]], capacity=64, max_new_tokens=2))
        self.assertIn("pfx.verify: 1 request, 1 response compared with a cold run, 0 mismatches, 4 KV rows compared", text)
        self.assertNotIn("1 requests", text)
        self.assertNotIn("1 responses", text)


class Arguments(unittest.TestCase):
    """pfx.Lane's and pfx.verify's arguments: defaults the engine gives, and errors that name the argument."""

    @verifies("PY-4")
    def test_without_a_capacity_a_lane_takes_the_engines_own(self):
        engine = OwnedCache(4)
        engine.capacity = 100
        self.assertEqual(pfx.Lane(engine).capacity, 100)
        report = pfx.verify(engine, [list(range(1, 16)) * 6])  # 90 tokens: more than 64, fewer than 100
        self.assertTrue(report.ok, str(report))
        self.assertEqual(pfx.Lane(OwnedCache(4)).capacity, 4096)  # an engine that does not say: the default
        self.assertEqual(pfx.Lane(HostRows(4)).capacity, 4096)
        self.assertEqual(pfx.Lane(engine, capacity=50).capacity, 50)

    @verifies("PY-4")
    def test_rule_chunk_0_is_refused_as_pfx_conform_and_pfx_replay_refuse_it(self):
        for run in (lambda **kw: pfx.Lane(OwnedCache(4), **kw), lambda **kw: pfx.verify(OwnedCache(4), [[1]], **kw),
                    lambda **kw: pfx.conform(OwnedCache(4), **kw)):
            with self.assertRaisesRegex(ValueError, "rule_chunk must be at least 1"):
                run(rule_chunk=0)
        self.assertEqual(pfx.Lane(OwnedCache(4), rule_chunk=None).chunk, 4)

    @verifies("PY-4")
    def test_a_bad_argument_is_named_with_what_was_expected(self):
        lane = pfx.Lane(OwnedCache(4), capacity=64)
        with self.assertRaisesRegex(TypeError, r"pfx.Lane.serve: max_new_tokens must be an integer, not float \(2.5\)"):
            lane.serve([1, 2, 3], 2.5)
        with self.assertRaisesRegex(ValueError, "pfx.Lane: keep_min must be >= 0, not -1"):
            pfx.Lane(OwnedCache(4), keep_min=-1)
        with self.assertRaisesRegex(TypeError, "pfx.Lane: enabled must be True or False, not str"):
            pfx.Lane(OwnedCache(4), enabled="yes")
        with self.assertRaisesRegex(ValueError, r"pfx.Lane: chunk must be at least 1 \(None: the engine's chunk\)"):
            pfx.Lane(OwnedCache(4), chunk=0)
        with self.assertRaisesRegex(TypeError, "pfx.verify: capacity must be an integer, not str"):
            pfx.verify(OwnedCache(4), [[1]], capacity="64")
        with self.assertRaisesRegex(ValueError, "pfx.verify: max_new_tokens must be >= 0, not -2"):
            pfx.verify(OwnedCache(4), [[1]], max_new_tokens=-2)
        with self.assertRaisesRegex(ValueError, r"trace\[0\] \(line 1\): max_new_tokens must be >= 0, not -1"):
            pfx.verify(OwnedCache(4), [([1], -1)])
        self.assertEqual(len(lane.serve([1, 2, 3], 2).generated), 2)  # the lane is unharmed


class Degenerate(OwnedCache):
    """An engine that fails one premise of the check; otherwise it is OwnedCache."""

    def __init__(self, fault):
        super().__init__(4)
        self.fault = fault

    def prefill(self, tokens, start):
        logits = super().prefill(tokens, start)
        if self.fault == "writes nothing":
            self.rows[start:] = [0.0] * len(tokens)
        if self.fault == "constant logits":
            return [0.5] * self.vocab
        if self.fault == "nan logits":
            return [float("nan")] * self.vocab
        return logits


class HostWritesNothing(HostRows):
    def prefill(self, tokens, start, kv):
        return array.array("f", [float(j * tokens[-1]) for j in range(self.vocab)])


class ConformPremises(unittest.TestCase):
    @verifies("CONF-4")
    def test_a_degenerate_engine_is_called_degenerate_naming_the_premise(self):
        cases = [(Degenerate("writes nothing"), "rows written"), (HostWritesNothing(4), "rows written"),
                 (Degenerate("constant logits"), "logits depend on tokens"),
                 (Degenerate("nan logits"), "finite logits")]
        for engine, premise in cases:
            with self.subTest(premise=premise, engine=type(engine).__name__):
                report = pfx.conform(engine, budget="quick")
                self.assertEqual(report.verdict, "degenerate", str(report))
                self.assertEqual(report.exit_status, 6)
                self.assertEqual(report.premise_failure.premise, premise)
                self.assertIn(premise, str(report.premise_failure))
                self.assertIsNone(report.recommended)
                self.assertEqual(report.cold_runs, 0)
                self.assertIn("DEGENERATE", report.explanation)

    @verifies("CONF-4 DRV-8 CONF-3")
    def test_an_engine_that_owns_its_cache_is_checked_through_forget(self):
        for chunk in (1, 2, 4):
            with self.subTest(chunk=chunk):
                report = pfx.conform(OwnedCache(chunk), budget="quick")
                self.assertIsNone(report.premise_failure)
                self.assertEqual(report.verdict, "safe", str(report))
                self.assertEqual(report.recommended, chunk)
                for grid in report.grids:
                    self.assertEqual(grid.exact, grid.grid % chunk == 0, grid.grid)
                    if grid.mismatch and grid.mismatch.difference.where != "logits":
                        self.assertEqual(grid.mismatch.difference.where, "row bytes")


if __name__ == "__main__":
    unittest.main()
