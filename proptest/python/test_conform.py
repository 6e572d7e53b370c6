"""pfx.conform's protocol for engines written in Python (docs/python.md, "Checking an engine"), on
engines in plain Python whose answer is known: the grid found, a non-deterministic engine flagged,
the report's fields, and every misuse refused with an error that names it. Needs no numpy."""
from __future__ import annotations

import array
import json
import os
import random
import unittest

import pfx
from support import verifies


class ChunkShaped:
    """Rows depend on where the chunk starts (exact only on multiples of `chunk`); logits do not."""
    vocab, layers, width = 8, 1, 2

    def __init__(self, chunk):
        self.chunk = chunk

    def prefill(self, tokens, start, kv):
        for i, t in enumerate(tokens):
            kv[0, 0, start + i, 0] = t + 0.25 * i
            kv[0, 0, start + i, 1] = start + i
            kv[0, 1, start + i, 0] = t
            kv[0, 1, start + i, 1] = 0.0
        return array.array("f", [float(j * tokens[-1]) for j in range(self.vocab)])


class Noisy(ChunkShaped):
    """Two cold runs differ: its logits carry a random draw."""

    def __init__(self, chunk):
        super().__init__(chunk)
        self.random = random.Random(3)

    def prefill(self, tokens, start, kv):
        super().prefill(tokens, start, kv)
        return [self.random.random() for _ in range(self.vocab)]


class OneTokenStep(ChunkShaped):
    """Splits each call into steps of `step` tokens from its start and computes a last step of one
    token otherwise (its logits 0.5 higher): with `step` dividing `chunk`, only a resume the rule under
    prefill_step = `step` never makes differs from its cold run (INV-12). Rows are its token and position."""

    def __init__(self, chunk, step):
        super().__init__(chunk)
        self.step = step

    def prefill(self, tokens, start, kv):
        for i, t in enumerate(tokens):
            kv[0, 0, start + i, 0], kv[0, 0, start + i, 1] = t, start + i
            kv[0, 1, start + i, 0], kv[0, 1, start + i, 1] = t, 0.0
        alone = 0.5 if (len(tokens) - 1) % self.step == 0 else 0.0
        return array.array("f", [float(j * tokens[-1]) + alone for j in range(self.vocab)])


class ConformProtocol(unittest.TestCase):
    @verifies("CONF-3")
    def test_a_python_engine_is_exact_on_multiples_of_its_chunk(self):
        for chunk in (1, 2, 3, 4, 6):
            with self.subTest(chunk=chunk):
                report = pfx.conform(ChunkShaped(chunk), budget="quick")
                self.assertEqual(report.recommended, chunk, str(report))
                self.assertEqual(report.verdict, "safe")
                self.assertEqual(report.exit_status, 0)
                self.assertTrue(report.deterministic)
                for grid in report.grids:
                    self.assertEqual(grid.exact, grid.grid % chunk == 0, grid.grid)
                    self.assertGreater(grid.resumes, 0)

    @verifies("CONF-3")
    def test_the_rule_chunk_and_the_engines_chunk_are_the_callers(self):
        report = pfx.conform(ChunkShaped(4), budget="quick", rule_chunk=6)
        self.assertEqual((report.chunk, report.rule_chunk), (4, 6))
        self.assertEqual(report.verdict, "unsafe")
        self.assertEqual(report.exit_status, 1)
        self.assertIn("Configure the rule's chunk to 4", report.explanation)
        m = report.grid(6).mismatch
        self.assertEqual(m.offset % 6, 0)
        self.assertEqual(m.held[:m.offset], m.prompt[:m.offset])
        self.assertEqual(m.difference.where, "row")
        self.assertIsNone(report.grid(5))
        # chunk= overrides the engine's own.
        self.assertEqual(pfx.conform(ChunkShaped(4), budget="quick", chunk=2).chunk, 2)

    @verifies("CONF-3")
    def test_the_prefill_step_skips_the_offsets_the_rule_never_resumes_at(self):
        for chunk, step in ((4, 4), (6, 3), (8, 2)):
            with self.subTest(chunk=chunk, step=step):
                engine = OneTokenStep(chunk, step)
                report = pfx.conform(engine, budget="quick", prefill_step=step)
                self.assertTrue(report.grid(1).exact, str(report))
                self.assertGreater(report.grid(1).skipped, 0)
                self.assertEqual((report.recommended, report.verdict), (1, "safe"))
                self.assertIn(f"the prefill step ({step} tokens)", report.skip_reason)
                self.assertIn(f"the rule never resumes at: {report.skip_reason}", str(report))
                j = json.loads(report.to_json())
                self.assertEqual([g["skipped"] for g in j["grids"]], [g.skipped for g in report.grids])
                self.assertEqual(j["skip_reason"], report.skip_reason)
                # Without it the same engine differs on grid 1, at a resume the rule never makes.
                plain = pfx.conform(engine, budget="quick")
                untimed = lambda r: {k: v for k, v in json.loads(r.to_json()).items() if k != "elapsed_s"}
                self.assertEqual(untimed(pfx.conform(engine, budget="quick", prefill_step=0)), untimed(plain))
                self.assertFalse(plain.grid(1).exact)
                self.assertEqual(plain.grid(1).mismatch.difference.where, "logits")
                self.assertEqual(sum(g.skipped for g in plain.grids), 0)
                self.assertIsNone(plain.skip_reason)
        with self.assertRaisesRegex(ValueError, "pfx.conform: prefill_step must be >= 0, not -1"):
            pfx.conform(OneTokenStep(4, 4), budget="quick", prefill_step=-1)
        with self.assertRaisesRegex(TypeError, "pfx.conform: prefill_step must be an integer, not str"):
            pfx.conform(OneTokenStep(4, 4), budget="quick", prefill_step="4")

    @verifies("CONF-3 INV-2")
    def test_decode_rows_are_found_reusable_or_named_where_they_differ(self):
        # Without a decode of its own an engine decodes by a one-token prefill: over chunk 1 its decode
        # rows are a prefill's. One whose decode writes its row otherwise is caught at its first resume.
        report = json.loads(pfx.conform(ChunkShaped(1), budget="quick", decode_rows=True).to_json())
        decode = report["decode_rows"]
        self.assertTrue(decode["reusable"], decode)
        self.assertEqual((decode["resumes"], decode["rescored"], decode["kv_blocks"]), (200, 100, 200))
        self.assertNotIn("decode_rows", json.loads(pfx.conform(ChunkShaped(1), budget="quick").to_json()))

        class DecodesOtherwise(ChunkShaped):
            def decode(self, token, position, kv):
                logits = self.prefill([token], position, kv)
                kv[0, 1, position, 1] = 0.5  # a value row a prefill leaves 0
                return logits

        differing = pfx.conform(DecodesOtherwise(1), budget="quick", decode_rows=True)
        self.assertEqual(differing.verdict, "safe")  # the finding leaves the verdict (INV-2)
        self.assertIn("decode rows: DIFFER at resume 1", str(differing))
        self.assertFalse(json.loads(differing.to_json())["decode_rows"]["reusable"])

    @verifies("CONF-3")
    def test_a_non_deterministic_engine_is_flagged(self):
        report = pfx.conform(Noisy(2), budget="quick")
        self.assertFalse(report.deterministic)
        self.assertEqual(report.verdict, "nondeterministic")
        self.assertEqual(report.exit_status, 4)
        self.assertIsNone(report.recommended)
        self.assertEqual(report.cold_disagreement.difference.where, "logits")
        self.assertIn("verdict: nondeterministic", str(report))

    @verifies("CONF-3")
    def test_the_budget_sets_how_much_runs(self):
        quick = pfx.conform(ChunkShaped(2), budget="quick")
        small = pfx.conform(ChunkShaped(2), budget="quick", max_grid=4, prompts=2, seed=9)
        self.assertEqual([g.grid for g in small.grids], [1, 2, 4])
        self.assertEqual(small.prompts, 2 * len(small.lengths))
        self.assertEqual(quick.cold_runs, 2 * quick.prompts)

    @verifies("CONF-3")
    def test_misuse_is_refused_with_an_error_that_names_it(self):
        class NoWidth:
            chunk, vocab, layers = 4, 8, 1

            def prefill(self, tokens, start, kv):
                return [0.0] * 8

        with self.assertRaisesRegex(TypeError, "no attribute 'width'"):
            pfx.conform(NoWidth())
        bad = ChunkShaped(4)
        bad.chunk = 0
        with self.assertRaisesRegex(ValueError, "engine.chunk must be at least 1"):
            pfx.conform(bad)
        bad.chunk = "4"
        with self.assertRaisesRegex(TypeError, "engine.chunk must be an int"):
            pfx.conform(bad)
        with self.assertRaisesRegex(ValueError, "unknown budget 'huge'"):
            pfx.conform(ChunkShaped(4), budget="huge")

        class ShortLogits(ChunkShaped):
            def prefill(self, tokens, start, kv):
                super().prefill(tokens, start, kv)
                return [0.0, 1.0]

        with self.assertRaisesRegex(ValueError, "8 numbers"):
            pfx.conform(ShortLogits(4), budget="quick")

        class Failing(ChunkShaped):
            def prefill(self, tokens, start, kv):
                raise KeyError("the engine's own error")

        with self.assertRaisesRegex(KeyError, "the engine's own error"):
            pfx.conform(Failing(4), budget="quick")

        kept = []

        class Keeper(ChunkShaped):
            def prefill(self, tokens, start, kv):
                kept.append(kv.cast("B"))  # a view of pfx's rows that outlives the call
                return super().prefill(tokens, start, kv)

        with self.assertRaisesRegex(ValueError, "kept a view of kv"):
            pfx.conform(Keeper(4), budget="quick")


class Recording(ChunkShaped):
    """Keeps the tokens of every call: what the check chose to run."""

    def __init__(self, chunk):
        super().__init__(chunk)
        self.calls = []

    def prefill(self, tokens, start, kv):
        self.calls.append((tuple(tokens), start))
        return super().prefill(tokens, start, kv)


class ConformRun(unittest.TestCase):
    """What a run shows besides its verdict: the seed it used, its progress, and the program's text."""

    def run_with(self, seed):
        engine = Recording(4)
        report = pfx.conform(engine, budget="quick", seed=seed)
        return engine.calls, report

    @verifies("CONF-3")
    def test_the_seed_chooses_the_prompts(self):
        first, report = self.run_with(7)
        self.assertIn(", seed 7\n", str(report))
        self.assertEqual(self.run_with(7)[0], first)  # the same seed: the same runs
        self.assertNotEqual(self.run_with(8)[0], first)
        self.assertNotEqual(self.run_with(None)[0], first)  # the budget's own seed, 1

    @verifies("CONF-3")
    def test_progress_is_told_prompt_by_prompt(self):
        told = []
        report = pfx.conform(ChunkShaped(4), budget="quick", progress=lambda done, total: told.append((done, total)))
        self.assertEqual(report.verdict, "safe")
        total = told[0][1]
        self.assertEqual(told, [(done, total) for done in range(1, total + 1)])
        with self.assertRaisesRegex(TypeError, "progress must be None .*, False .* or a callable"):
            pfx.conform(ChunkShaped(4), budget="quick", progress="bar")

        def stop(done, total):
            raise KeyboardInterrupt
        with self.assertRaises(KeyboardInterrupt):  # the caller's callback may end the run
            pfx.conform(ChunkShaped(4), budget="quick", progress=stop)

    @verifies("CONF-3")
    def test_a_bar_is_drawn_on_a_terminal_and_erased_and_nothing_is_drawn_elsewhere(self):
        import io
        import sys
        from pfx import _progress

        class Terminal(io.StringIO):
            def isatty(self):
                return True
        saved = sys.stderr
        try:
            sys.stderr = io.StringIO()
            self.assertIsNone(_progress.on_terminal("prompts"))
            pfx.conform(ChunkShaped(4), budget="quick")
            self.assertEqual(sys.stderr.getvalue(), "")  # not a terminal: no bar
            sys.stderr = Terminal()
            self.assertIsInstance(_progress.on_terminal("prompts"), _progress.Bar)
        finally:
            sys.stderr = saved
        shown = Terminal()
        bar = _progress.Bar("prompts", shown, delay=0)
        bar(3, 12)
        bar.close()
        self.assertEqual(shown.getvalue(), "\r\033[K[#######" + " " * 23 + "] 3/12 prompts, 0 s\r\033[K")

    @verifies("CONF-3")
    def test_the_text_is_the_programs_with_what_was_compared(self):
        import json
        report = pfx.conform(ChunkShaped(4), budget="quick")
        compared = json.loads(report.to_json())["comparisons"]
        self.assertGreater(compared, 0)
        self.assertTrue(str(report).endswith(f"compared: {compared} runs with their cold run, bit for bit\n"),
                        str(report))


class ConformDocs(unittest.TestCase):
    @verifies("CONF-3")
    def test_the_numpy_engine_of_python_md_is_the_one_the_suite_checks(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "docs", "python.md"), encoding="utf-8") as doc:
            text = doc.read()
        with open(os.path.join(here, "numpy_engine.py"), encoding="utf-8") as source:
            engine = source.read()
        start = engine.index("class NumpyEngine:")
        shown = text.index("class NumpyEngine:")
        body = engine[start:].rstrip("\n")
        self.assertEqual(text[shown:shown + len(body)], body,
                         "docs/python.md shows another NumpyEngine than proptest/python/numpy_engine.py")


if __name__ == "__main__":
    unittest.main()
