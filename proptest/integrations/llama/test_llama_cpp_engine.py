"""pfx.integrations.llama_cpp.LlamaCppEngine on a model written by pfx.fixtures.tiny_gguf: the engine
protocol of an engine that owns its cache (prefill, decode, forget, read_rows), and what THM-1 says
of it: a resume on the grid of the chunk equals a cold run, byte for byte.

Run as the Python suites are (proptest/python/run_tests.py, which writes the report the requirements
check reads), with the model in PFX_LLAMA_MODEL. Every test is skipped, with the reason, when
llama_cpp cannot be imported or no model is given.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import unittest

import pfx  # the build's python/ folder is on PYTHONPATH (CTest puts it there)
from pfx.integrations import llama_cpp as llama_cpp_module
from support import rng, verifies  # proptest/python, on the path that run_tests.py sets

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.environ.get("PFX_LLAMA_MODEL", "")


def installed() -> bool:
    """Whether llama-cpp-python is installed (found without importing it: an import may fail, and
    that is what a test here checks)."""
    return importlib.util.find_spec("llama_cpp") is not None


def why_not() -> str:
    """Why the suite cannot run here, or ""."""
    if not MODEL:
        return ("no model: PFX_LLAMA_MODEL names the GGUF file pfx.fixtures.tiny_gguf writes, which the build's "
                "fixture writes where llama.cpp was found (scripts/llama.sh)")
    if not installed():
        return "llama-cpp-python is not installed; scripts/llama.sh --python installs it"
    return ""


WHY_NOT = why_not()


def cold(engine, prompt):
    """The prompt prefilled from 0 on the chunk grid, after forgetting everything."""
    engine.forget(0)
    logits = None
    for start in range(0, len(prompt), engine.chunk):
        logits = engine.prefill(prompt[start:start + engine.chunk], start)
    return logits.tobytes(), engine.read_rows(0, len(prompt))


def resumed(engine, held, prompt, offset):
    """`held` cold, then the prompt from `offset` (rows [0, offset) shared), on the chunk grid."""
    cold(engine, held)
    engine.forget(offset)
    logits = None
    start = offset
    while start < len(prompt):
        end = min(len(prompt), (start // engine.chunk + 1) * engine.chunk)
        logits = engine.prefill(prompt[start:end], start)
        start = end
    return logits.tobytes(), engine.read_rows(0, len(prompt))


@unittest.skipIf(not installed(), "llama-cpp-python is not installed; scripts/llama.sh --python installs it")
class InstalledPackage(unittest.TestCase):
    """llama-cpp-python as scripts/llama.sh --python installs it: usable on its own, and left alone by pfx."""

    @verifies("PY-4")
    def test_llama_cpp_imports_on_its_own_in_a_new_interpreter(self):
        environment = {k: v for k, v in os.environ.items() if k != "LLAMA_CPP_LIB_PATH"}
        run = subprocess.run([sys.executable, "-c", "import llama_cpp"], env=environment, capture_output=True,
                             text=True, check=False)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])

    @unittest.skipIf(WHY_NOT, WHY_NOT)
    @verifies("PY-4")
    def test_making_an_engine_changes_no_environment_variable(self):
        before = dict(os.environ)
        llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, capacity=64)
        self.assertEqual(dict(os.environ), before)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class LlamaCppEngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, flash_attn="on", threads=1, capacity=512)

    @verifies("PY-4")
    def test_protocol_attributes(self):
        self.assertEqual(self.engine.chunk, 16)
        self.assertEqual(self.engine.vocab, 512)
        self.assertEqual(self.engine.capacity, 512)

    @verifies("PY-4 DRV-8 THM-1")
    def test_resume_on_the_grid_equals_the_cold_run(self):
        r = rng(self)
        for _ in range(4):
            prompt = [r.randrange(3, 512) for _ in range(r.randrange(20, 90))]
            reference = cold(self.engine, prompt)
            for offset in range(16, len(prompt), 16):
                held = prompt[:offset] + [r.randrange(3, 512) for _ in range(r.randrange(0, 16))]
                self.assertEqual(resumed(self.engine, held, prompt, offset), reference, f"offset {offset}")

    @verifies("PY-4 DRV-8")
    def test_read_rows_sees_a_changed_row(self):
        prompt = list(range(3, 40))
        _, rows = cold(self.engine, prompt)
        other = prompt[:-1] + [prompt[-1] + 1]
        _, changed = cold(self.engine, other)
        self.assertEqual(len(rows), len(changed))
        self.assertNotEqual(rows, changed)
        self.assertEqual(rows[: len(rows) // 2][:10], changed[:10])  # the first rows are the same

    @verifies("PY-4 DRV-9")
    def test_read_each_row_gives_each_rows_own_read_from_one_serialization(self):
        prompt = list(range(3, 40))
        cold(self.engine, prompt)
        for start, end in [(0, len(prompt)), (5, 21), (7, 7)]:
            each = self.engine.read_each_row(start, end)
            self.assertEqual(each, [self.engine.read_rows(p, p + 1) for p in range(start, end)])
        with self.assertRaisesRegex(ValueError, "no row at position 37"):
            self.engine.read_each_row(0, 38)

    @verifies("PY-4 DRV-8")
    def test_forget_drops_rows(self):
        cold(self.engine, list(range(3, 40)))
        self.engine.forget(20)
        with self.assertRaisesRegex(ValueError, "no row at position 20"):
            self.engine.read_rows(0, 21)

    @verifies("PY-4 DRV-8")
    def test_decode_writes_one_row_and_returns_logits(self):
        prompt = list(range(5, 5 + 33))
        cold(self.engine, prompt[:-1])
        logits = self.engine.decode(prompt[-1], len(prompt) - 1)
        self.assertEqual(logits.shape, (512,))
        self.assertEqual(len(self.engine.read_rows(0, len(prompt))) * 32, len(self.engine.read_rows(0, 32)) * 33)

    @verifies("PY-4")
    def test_bad_arguments_raise(self):
        with self.assertRaises(FileNotFoundError):
            llama_cpp_module.LlamaCppEngine(os.path.join(HERE, "no-such-model.gguf"), chunk=16)
        with self.assertRaisesRegex(ValueError, "ubatch 32"):
            llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, ubatch=32)
        with self.assertRaisesRegex(ValueError, "expected 1 to the chunk"):
            self.engine.prefill(list(range(3, 3 + 17)), 0)
        with self.assertRaisesRegex(TypeError, r"LlamaCppEngine: chunk must be an int >= 1, got str \('16'\)"):
            llama_cpp_module.LlamaCppEngine(MODEL, chunk="16")
        with self.assertRaisesRegex(ValueError, "LlamaCppEngine: threads must be an int >= 1, got 0"):
            llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, threads=0)
        with self.assertRaisesRegex(ValueError, "LlamaCppEngine: capacity must be an int >= 1, got -5"):
            llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, capacity=-5)
        with self.assertRaisesRegex(TypeError, "LlamaCppEngine: model_path must be a path"):
            llama_cpp_module.LlamaCppEngine(None, chunk=16)

    @verifies("PY-4")
    def test_a_file_that_is_not_a_model_is_refused_in_pfxs_words_alone(self):
        import io
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".gguf") as garbage:
            garbage.write(b"not a model" * 10)
            garbage.flush()
            saved, sys.stderr = sys.stderr, io.StringIO()
            try:
                with self.assertRaisesRegex(OSError, "cannot load the model .*: llama.cpp does not read it as a GGUF "
                                                     r"model \(llama.cpp: .*gguf"):
                    llama_cpp_module.LlamaCppEngine(garbage.name, chunk=16)
                shown = sys.stderr.getvalue()
            finally:
                sys.stderr = saved
        self.assertEqual(shown, "")  # llama.cpp's own lines are in the error, not before it

    @verifies("PY-4")
    def test_the_context_is_the_models_trained_one_unless_a_capacity_lowers_it(self):
        trained = 8192  # pfx.fixtures.tiny_gguf's --ctx
        engine = llama_cpp_module.LlamaCppEngine(MODEL, chunk=16)
        self.assertEqual((engine.trained_context, engine.capacity), (trained, trained))
        self.assertEqual(pfx.Lane(engine).capacity, trained)  # a lane without a capacity takes the engine's
        self.assertEqual(llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, capacity=1 << 20).capacity, trained)
        small = llama_cpp_module.LlamaCppEngine(MODEL, chunk=16, capacity=40)
        self.assertEqual(small.capacity, 40)
        small.prefill(list(range(3, 19)), 0)
        with self.assertRaisesRegex(ValueError, r"positions 32..47 are past the context of 40 rows \(the model's "
                                                r"trained context is 8192\)"):
            small.prefill(list(range(3, 19)), 32)
        with self.assertRaisesRegex(ValueError, "41 prompt tokens \\+ 0 new tokens do not fit the KV state's 40 rows"):
            pfx.Lane(small).serve(list(range(3, 44)), 0)

    @verifies("PY-4")
    def test_the_logits_are_llama_cpps_own_for_the_last_token_of_each_call(self):
        import llama_cpp
        import numpy as np
        r = rng(self)
        prompt = [r.randrange(3, 512) for _ in range(45)]  # three calls: 16, 16 and 13 tokens
        model = llama_cpp.Llama(MODEL, n_ctx=512, n_batch=16, n_ubatch=16, n_threads=1, n_threads_batch=1,
                                logits_all=True, flash_attn=True, verbose=False)
        # The same calls as the engine's: the prompt in calls of 16, then the decoded token alone. A token
        # computed in another call shape may differ by more than the tolerance (one call of 14 rows where
        # the engine decodes one came out 1.3e-3 away).
        model.eval(prompt)
        model.eval([7])
        own = np.asarray(model.scores[:len(prompt) + 1], dtype=np.float32)
        engine = self.engine
        engine.forget(0)
        for start in range(0, len(prompt), 16):
            logits = engine.prefill(prompt[start:start + 16], start)
            last = min(start + 16, len(prompt)) - 1
            np.testing.assert_allclose(logits, own[last], rtol=1e-3, atol=1e-3, err_msg=f"the call from {start}")
        np.testing.assert_allclose(engine.decode(7, len(prompt)), own[len(prompt)], rtol=1e-3, atol=1e-3)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class PfxOverLlamaCppTest(unittest.TestCase):
    """pfx.conform and pfx.Lane accept the engine (an engine that owns its cache)."""

    def engine(self, **kw):
        return llama_cpp_module.LlamaCppEngine(MODEL, chunk=64, flash_attn="on", threads=1, capacity=2048, **kw)

    @verifies("CONF-3 CEX-1")
    def test_conform_finds_chunk_64_safe_and_rule_chunk_1_unsafe(self):
        report = pfx.conform(self.engine())
        self.assertEqual(report.verdict, "safe")
        self.assertEqual(pfx.conform(self.engine(), rule_chunk=1).verdict, "unsafe")

    @verifies("PY-4 DRV-8 THM-1")
    def test_lane_with_reuse_equals_lane_without_bit_for_bit(self):
        r = rng(self)
        lane = pfx.Lane(self.engine(), keep_min=64, capacity=2048)
        cold = pfx.Lane(self.engine(), keep_min=64, capacity=2048, enabled=False)
        conversation = [r.randrange(3, 512) for _ in range(100)]
        reused = 0
        for _ in range(4):
            a = lane.serve(conversation, 8)
            b = cold.serve(conversation, 8)
            reused += a.decision.offset
            self.assertEqual(list(a.generated), list(b.generated))
            self.assertEqual(bytes(a.logits), bytes(b.logits))
            conversation = conversation + list(a.generated) + [r.randrange(3, 512) for _ in range(50)]
        self.assertGreater(reused, 0)

