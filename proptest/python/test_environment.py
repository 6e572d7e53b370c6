"""TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN: the original class's meanings and defaults and
the conventional spellings, read at import by the one parser C++ uses too (driver/src/environment.cpp);
a malformed value never breaks `import pfx`."""
from __future__ import annotations

import os
import subprocess
import sys
import unittest

import pfx
from support import environment, fresh_pfx, fresh_seed_module, verifies


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter (a fresh import of pfx) with the two variables set as given."""
    variables = {k: v for k, v in os.environ.items() if not k.startswith("TF_GLM53_PREFIX_CACHE")}
    variables.update(env)
    return subprocess.run([sys.executable, "-c", code], env=variables, capture_output=True, text=True, timeout=60)


class PyEnvironment(unittest.TestCase):
    def tearDown(self):
        fresh_pfx()

    @verifies("PY-1 DRV-5 AUDIT-259")
    def test_reads_the_seeds_variables_and_defaults(self):
        cases = [({}, True, 64), ({"TF_GLM53_PREFIX_CACHE": "0"}, False, 64),
                 ({"TF_GLM53_PREFIX_CACHE": "1"}, True, 64), ({"TF_GLM53_PREFIX_CACHE_MIN": "0"}, True, 0),
                 ({"TF_GLM53_PREFIX_CACHE_MIN": " 17\n", "TF_GLM53_PREFIX_CACHE": " 1"}, True, 17)]
        for env, enabled, keep_min in cases:
            with environment(**env):
                seed, ours = fresh_seed_module(), fresh_pfx()
                self.assertEqual((ours.TF_PREFIX_CACHE, ours.KEEP_MIN), (enabled, keep_min), env)
                self.assertEqual((seed.TF_PREFIX_CACHE, seed.KEEP_MIN), (enabled, keep_min), env)
                self.assertEqual(ours.PromptPrefix().enabled, seed.PromptPrefix().enabled)
                self.assertEqual(ours.config_from_environment(), pfx.Config(enabled=enabled, keep_min=keep_min))

    @verifies("PY-1")
    def test_reads_keep_min_at_call_time_as_the_seed_does(self):
        with environment():
            seed_module, ours_module = fresh_seed_module(), fresh_pfx()
            seed, ours = seed_module.PromptPrefix(), ours_module.PromptPrefix()
            for prefix in (seed, ours):
                prefix.record(list(range(10)), 10)
            self.assertEqual((seed.offset_for(list(range(12))), ours.offset_for(list(range(12)))), (0, 0))
            seed_module.KEEP_MIN = ours_module.KEEP_MIN = 5
            self.assertEqual((seed.offset_for(list(range(12))), ours.offset_for(list(range(12)))), (10, 10))

    @verifies("PY-2 DRV-5")
    def test_a_malformed_variable_does_not_break_the_import_and_is_named_when_used(self):
        code = """
import pfx
machine = pfx.Machine()  # needs no environment
machine.record(range(70), 70)
assert machine.query(range(71)).offset == 70
assert pfx.TF_PREFIX_CACHE is True  # the other variable is still read
for read in (lambda: pfx.KEEP_MIN, pfx.PromptPrefix):
    try:
        read()
    except pfx.ConfigError as error:
        assert isinstance(error, ValueError)
        print(error)
    else:
        raise SystemExit("no ConfigError")
"""
        ours = run_python(code, TF_GLM53_PREFIX_CACHE_MIN="abc")
        self.assertEqual(ours.returncode, 0, ours.stderr)
        self.assertEqual(ours.stdout.splitlines(), ['TF_GLM53_PREFIX_CACHE_MIN="abc" is malformed: expected an '
                                                    'integer >= 0 such as 64 (Python\'s int() spellings: '
                                                    '"+64", "1_000")'] * 2)
        # The seed cannot even be imported.
        seed = subprocess.run([sys.executable, "-c", "import pfx.fixtures.original_prompt_prefix"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "TF_GLM53_PREFIX_CACHE_MIN": "abc"})
        self.assertNotEqual(seed.returncode, 0)
        self.assertIn("ValueError", seed.stderr)

    @verifies("PY-1 PY-2 DRV-5")
    def test_reads_the_conventional_spellings_and_differs_from_the_original_only_where_documented(self):
        on = ["1", "true", "on", "yes", "TRUE", "On", " yes\n", "", "  "]
        off = ["0", "false", "off", "no", "FALSE", "Off", " 0", "no\t"]
        for value in on + off:
            with environment(TF_GLM53_PREFIX_CACHE=value):
                original, ours = fresh_seed_module().TF_PREFIX_CACHE, fresh_pfx().TF_PREFIX_CACHE
                self.assertIs(ours, value in on, repr(value))
                # docs/python.md's table: the original turns reuse on for everything but exactly "0".
                if value.strip().lower() in ("false", "off", "no") or value == " 0":
                    self.assertIs(original, True, repr(value))
                else:
                    self.assertIs(original, ours, repr(value))
        for value in ("2", "maybe", "y", "o n", "-1"):
            with environment(TF_GLM53_PREFIX_CACHE=value):
                self.assertTrue(fresh_seed_module().TF_PREFIX_CACHE)
                ours = fresh_pfx()
                self.assertEqual(ours.KEEP_MIN, 64)
                for read in (lambda: ours.TF_PREFIX_CACHE, ours.PromptPrefix, ours.config_from_environment):
                    with self.assertRaises(pfx.ConfigError) as raised:
                        read()
                    self.assertIn(f'TF_GLM53_PREFIX_CACHE="{value}" is malformed', str(raised.exception))

    @verifies("PY-1 PY-2 DRV-5")
    def test_reads_keep_min_as_pythons_int_does(self):
        for value in ("+8", " 8 ", "1_000", "007", "-0", "18446744073709551615"):
            with environment(TF_GLM53_PREFIX_CACHE_MIN=value):
                self.assertEqual(fresh_pfx().KEEP_MIN, int(value))
                self.assertEqual(fresh_seed_module().KEEP_MIN, int(value))
        # A negative keep_min makes the original answer -1 for an empty prompt; pfx refuses it.
        with environment(TF_GLM53_PREFIX_CACHE_MIN="-1"):
            seed = fresh_seed_module().PromptPrefix()
            seed.record([1], 1)
            self.assertEqual(seed.offset_for([]), -1)
        for value in ("-1", "-5", "1.5", "0x10", " ", "", "64 tokens", "6__4", "99999999999999999999999"):
            with environment(TF_GLM53_PREFIX_CACHE_MIN=value):
                ours = fresh_pfx()
                self.assertIs(ours.TF_PREFIX_CACHE, True)
                for read in (lambda: ours.KEEP_MIN, ours.PromptPrefix):
                    with self.assertRaises(pfx.ConfigError) as raised:
                        read()
                    self.assertIn(f'TF_GLM53_PREFIX_CACHE_MIN="{value}" is malformed', str(raised.exception))
                    if value.startswith("-"):
                        self.assertIn("negative", str(raised.exception))

    @verifies("DRV-5")
    def test_reads_a_given_environment(self):
        self.assertEqual(pfx.config_from_environment({"TF_GLM53_PREFIX_CACHE": "0",
                                                      "TF_GLM53_PREFIX_CACHE_MIN": "8"}),
                         pfx.Config(enabled=False, keep_min=8, chunk=1))
        self.assertEqual(pfx.config_from_environment({}), pfx.Config())
        self.assertEqual(pfx.config_from_environment({"TF_GLM53_PREFIX_CACHE_MIN": "+8"}).keep_min, 8)
        with self.assertRaises(pfx.ConfigError):
            pfx.config_from_environment({"TF_GLM53_PREFIX_CACHE_MIN": "-8"})


if __name__ == "__main__":
    unittest.main()


class PyVllmSwitch(unittest.TestCase):
    """PFX_VLLM is read as every pfx switch is: the vLLM plugin's settings need no vLLM to be read."""

    @verifies("VLLM-3 DRV-5")
    def test_pfx_vllm_means_what_each_spelling_means_for_every_pfx_switch(self):
        from pfx.integrations import vllm as plugin
        self.assertIsNone(plugin.settings_from_environment({}))  # unset: off
        spellings = ["", " ", "1", "true", "On", " yes\n", "0", "false", "OFF", "no", "2", "enabled", "1 1", "\t"]
        for value in spellings:
            try:
                on = pfx._native.read_environment_flag("TF_GLM53_PREFIX_CACHE", value)
            except pfx.ConfigError:
                with self.assertRaises(pfx.ConfigError, msg=repr(value)) as refused:
                    plugin.settings_from_environment({"PFX_VLLM": value})
                self.assertIn("PFX_VLLM=", str(refused.exception))
                # The message lists what empty means, and what on and off mean for vLLM.
                self.assertIn("1, true, on, yes or empty (the plugin on:", str(refused.exception))
                self.assertIn("0, false, off or no (the plugin off: vLLM's own prefix caching, unchanged)",
                              str(refused.exception))
                continue
            settings = plugin.settings_from_environment({"PFX_VLLM": value})
            self.assertEqual(settings is not None, on, repr(value))
        self.assertIsNotNone(plugin.settings_from_environment({"PFX_VLLM": ""}))  # the one spelling that differed
