"""TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN: the seed's meanings and defaults, read at
import by the driver's one parser; a malformed value never breaks `import pfx`."""
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
        self.assertEqual(ours.stdout.splitlines(), ['TF_GLM53_PREFIX_CACHE_MIN="abc" is malformed: expected a '
                                                    'non-negative decimal count of tokens, such as 64'] * 2)
        # The seed cannot even be imported (run from the test's folder, where the seed's copy is).
        seed = subprocess.run([sys.executable, "-c", "import seed_prompt_prefix"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), timeout=60,
                              env={**os.environ, "TF_GLM53_PREFIX_CACHE_MIN": "abc"})
        self.assertNotEqual(seed.returncode, 0)
        self.assertIn("ValueError", seed.stderr)

    @verifies("PY-2 DRV-5")
    def test_refuses_values_the_seed_misreads(self):
        # The seed reads every TF_GLM53_PREFIX_CACHE but "0" as on, so a typo turns reuse on.
        for value in ("off", "false", "", "2", "yes"):
            with environment(TF_GLM53_PREFIX_CACHE=value):
                self.assertTrue(fresh_seed_module().TF_PREFIX_CACHE)
                ours = fresh_pfx()
                self.assertEqual(ours.KEEP_MIN, 64)
                for read in (lambda: ours.TF_PREFIX_CACHE, ours.PromptPrefix, ours.config_from_environment):
                    with self.assertRaises(pfx.ConfigError) as raised:
                        read()
                    self.assertIn(f'TF_GLM53_PREFIX_CACHE="{value}" is malformed', str(raised.exception))
        # Blanks around the value are ignored, so " 0" is off; the seed reads it as on.
        with environment(TF_GLM53_PREFIX_CACHE=" 0"):
            self.assertTrue(fresh_seed_module().TF_PREFIX_CACHE)
            self.assertIs(fresh_pfx().TF_PREFIX_CACHE, False)
        # A negative keep_min makes the seed answer -1 for an empty prompt; others crash its import.
        with environment(TF_GLM53_PREFIX_CACHE_MIN="-1"):
            seed = fresh_seed_module().PromptPrefix()
            seed.record([1], 1)
            self.assertEqual(seed.offset_for([]), -1)
        for value in ("-1", "1.5", "0x10", " ", "64 tokens", "99999999999999999999999"):
            with environment(TF_GLM53_PREFIX_CACHE_MIN=value):
                ours = fresh_pfx()
                self.assertIs(ours.TF_PREFIX_CACHE, True)
                for read in (lambda: ours.KEEP_MIN, ours.PromptPrefix):
                    with self.assertRaises(pfx.ConfigError) as raised:
                        read()
                    self.assertIn(f'TF_GLM53_PREFIX_CACHE_MIN="{value}" is malformed', str(raised.exception))

    @verifies("DRV-5")
    def test_reads_a_given_environment(self):
        self.assertEqual(pfx.config_from_environment({"TF_GLM53_PREFIX_CACHE": "0",
                                                      "TF_GLM53_PREFIX_CACHE_MIN": "8"}),
                         pfx.Config(enabled=False, keep_min=8, chunk=1))
        self.assertEqual(pfx.config_from_environment({}), pfx.Config())
        with self.assertRaises(pfx.ConfigError):
            pfx.config_from_environment({"TF_GLM53_PREFIX_CACHE_MIN": "+8"})


if __name__ == "__main__":
    unittest.main()
