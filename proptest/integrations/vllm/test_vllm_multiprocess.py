"""pfx.integrations.vllm in vLLM's default multiprocess mode, turned on in code by
pfx.integrations.vllm.enable(chunk=64, keep_min=64) before vllm.LLM: the scheduler runs in vLLM's
engine-core process, where the plugin is loaded through the entry point and reads the variables
enable() set, so a patch of this process alone would change nothing. Resumed responses equal their
cold runs and take what the rule allows on a grid of two blocks. A malformed knob, a chunk off vLLM's
block grid and an untested vLLM version stop vLLM's start with an error that names them."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import unittest
from unittest import mock

from support import SEED, verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    import vllm

    import pfx
    import pfx.integrations.vllm as plugin

CHUNK = 2 * vllm_lane.BLOCK
KEEP_MIN = 3 * vllm_lane.BLOCK
STEPS = 12

# A vLLM start in a fresh process, with the environment given; prints STARTED when it got that far.
STARTED = "pfx test: the vLLM engine started"
START = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import vllm_lane
    vllm_lane.start({model!r})
    print({started!r})
""")


def start_in_a_process(model, **variables):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PFX_VLLM")}
    environment.update(variables)
    script = START.format(here=os.path.dirname(os.path.abspath(__file__)), model=model, started=STARTED)
    return subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                          timeout=600)


@unittest.skipIf(WHY_NOT, WHY_NOT)
class PluginMultiprocess(unittest.TestCase):
    llm = None

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=False, in_process=False)
        plugin.enable(chunk=CHUNK, keep_min=KEEP_MIN)
        cls.llm = vllm_lane.start(vllm_lane.tiny_model())

    @classmethod
    def tearDownClass(cls):
        plugin.disable()

    @verifies("VLLM-1 VLLM-2 VLLM-3 INV-2 INV-4 INV-5 THM-1")
    def test_the_engine_core_process_applies_the_rule_enable_asked_for(self):
        resumed = 0
        for workload, generator in enumerate((vllm_lane.chat_workload, vllm_lane.chat_workload, vllm_lane.long_turns)):
            seed = f"{SEED}:multiprocess:{workload}"
            outcome = vllm_lane.run_workload(
                self.llm, seed, STEPS, vllm_lane.CacheModel(prompt_rows_only=True),
                lambda hit, length: vllm_lane.pfx_offset(hit, length, CHUNK, KEEP_MIN), generator)
            with self.subTest(workload=workload):
                self.assertEqual(outcome.differing, [], outcome.describe(seed))
                self.assertEqual(outcome.wrong_counts, [], outcome.describe(seed))
            resumed += outcome.resumed
        # Compared something: the long turns resume (a random chat may, by chance, never resume
        # at chunk 64 and keep_min 96).
        self.assertGreater(resumed, 0)

    @verifies("VLLM-3")
    def test_a_malformed_knob_stops_vllms_start_naming_the_variable(self):
        model = vllm_lane.tiny_model()
        for variable, value, expected in (
                ("PFX_VLLM_CHUNK", "abc", 'PFX_VLLM_CHUNK="abc" is malformed'),
                ("PFX_VLLM_KEEP_MIN", "-3", 'PFX_VLLM_KEEP_MIN="-3" is malformed'),
                ("PFX_VLLM_CHUNK", "48", "PFX_VLLM_CHUNK=48 is not a multiple of vLLM's block size 32"),
                ("PFX_VLLM", "maybe", 'PFX_VLLM="maybe" is malformed')):
            with self.subTest(variable=variable, value=value):
                ran = start_in_a_process(model, **{"PFX_VLLM": "1", variable: value})
                self.assertNotEqual(ran.returncode, 0, ran.stdout[-5000:])
                self.assertNotIn(STARTED, ran.stdout)
                self.assertIn(expected, ran.stdout + ran.stderr)  # vLLM logs the engine core's error to stdout


@unittest.skipIf(WHY_NOT, WHY_NOT)
class Settings(unittest.TestCase):
    """The knobs, read without starting vLLM."""

    @verifies("VLLM-3")
    def test_the_plugin_is_off_unless_pfx_vllm_says_on(self):
        for value in (None, "0", "off", "no", "false", " OFF\n"):
            environ = {} if value is None else {"PFX_VLLM": value}
            self.assertIsNone(plugin.settings_from_environment(environ), value)
        for value in ("1", "", "yes", "True"):  # empty is on, as for every pfx switch
            self.assertEqual(plugin.settings_from_environment({"PFX_VLLM": value}), plugin.Settings(None, 0), value)
        self.assertEqual(plugin.settings_from_environment(
            {"PFX_VLLM": "on", "PFX_VLLM_CHUNK": "64", "PFX_VLLM_KEEP_MIN": "1_000"}), plugin.Settings(64, 1000))

    @verifies("VLLM-3")
    def test_malformed_knobs_raise_config_errors_naming_the_variable(self):
        for variable, value in (("PFX_VLLM_CHUNK", "0"), ("PFX_VLLM_CHUNK", "2**5"), ("PFX_VLLM_CHUNK", ""),
                                ("PFX_VLLM_KEEP_MIN", "-1"), ("PFX_VLLM_KEEP_MIN", "18446744073709551616"),
                                ("PFX_VLLM", "2")):
            environ = {"PFX_VLLM": "1", variable: value}
            with self.subTest(variable=variable, value=value), self.assertRaises(pfx.ConfigError) as raised:
                plugin.settings_from_environment(environ)
            self.assertTrue(str(raised.exception).startswith(f'{variable}="{value}"'), str(raised.exception))

    @verifies("VLLM-3")
    def test_enable_names_a_bad_argument(self):
        for arguments in ({"chunk": 0}, {"chunk": -32}, {"chunk": 32.0}, {"chunk": True}, {"keep_min": -1},
                          {"keep_min": "64"}):
            with self.subTest(**arguments), self.assertRaises(ValueError) as raised:
                plugin.enable(**arguments)
            self.assertIn(next(iter(arguments)), str(raised.exception))
        self.assertNotIn("PFX_VLLM", os.environ)

    @verifies("VLLM-3")
    def test_an_untested_vllm_version_is_refused_before_anything_is_patched(self):
        with mock.patch.object(vllm, "__version__", "0.31.9"), mock.patch.dict(plugin._originals, {}, clear=True):
            with self.assertRaises(RuntimeError) as raised:
                plugin._install(plugin.Settings())
            self.assertEqual(plugin._originals, {})
        self.assertIn("tested with vLLM 0.32.0, and this is vLLM 0.31.9", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
