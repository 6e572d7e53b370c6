"""The way README.md and docs/python.md import pfx: from the build tree, by PYTHONPATH."""
from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import tempfile
import unittest

from support import verifies

BUILD = os.environ.get("PFX_PYTHON_BUILD_DIR", "")  # ${PROJECT_BINARY_DIR}/python, set by ctest
INSTALLED = os.environ.get("PFX_PYTHON_INSTALLED", "")  # site-packages, set by install_check.py
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python", "pfx")


class PyImport(unittest.TestCase):
    @verifies("PY-1 PY-3")
    def test_imports_from_the_build_tree_as_the_readme_says(self):
        if INSTALLED:
            self.skipTest("run against the installed copy: PyImport.ImportsTheInstalledCopyWithoutPythonpath")
        self.assertTrue(os.path.isdir(BUILD), f"PFX_PYTHON_BUILD_DIR={BUILD!r} is not the build tree's python/")
        code = """
import pfx
machine = pfx.Machine(pfx.Config(keep_min=2, chunk=2))
prompt = [5, 6, 7, 8, 9]
decision = machine.query(prompt)
machine.begin(prompt, decision.offset)
machine.commit(prompt + [10], len(prompt))
print(machine.query(prompt + [10, 11]))
print(pfx.PromptPrefix())
print(pfx.__file__)
"""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TF_GLM53_PREFIX_CACHE")}
        env["PYTHONPATH"] = BUILD
        with tempfile.TemporaryDirectory() as elsewhere:  # nothing importable beside it
            run = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True,
                                 text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.splitlines(), [
            "Decision(offset=4, common_prefix=6, reason=Reason.reused, bound=Bound.alignment)",
            "PromptPrefix(len(ids)=0, canonical_end=0, enabled=True)",
            os.path.join(BUILD, "pfx", "__init__.py")])
        # The pure-Python files are the source's, copied at build time.
        for name in ("__init__.py", "prompt_prefix.py"):
            self.assertTrue(filecmp.cmp(os.path.join(SOURCE, name), os.path.join(BUILD, "pfx", name), shallow=False),
                            f"{name} in the build tree differs from python/pfx/{name}: rebuild")

    @verifies("PY-1 PY-3")
    def test_imports_the_installed_copy_without_pythonpath(self):
        if not INSTALLED:
            self.skipTest("run against the build tree (proptest/python/install_check.py installs a copy)")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        with tempfile.TemporaryDirectory() as elsewhere:
            run = subprocess.run([sys.executable, "-c", "import pfx; print(pfx.__file__); help(pfx)"], cwd=elsewhere,
                                 env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.splitlines()[0], os.path.join(INSTALLED, "pfx", "__init__.py"))
        for shipped in ("py.typed", "_native.pyi", "__init__.py", "prompt_prefix.py", "_write.py"):
            self.assertTrue(os.path.isfile(os.path.join(INSTALLED, "pfx", shipped)), f"{shipped} is not installed")

    @verifies("PY-1 PY-3")
    def test_every_public_name_has_a_docstring(self):
        import pfx
        for name in pfx.__all__:
            value = getattr(pfx, name)
            if isinstance(value, (bool, int)):
                continue  # TF_PREFIX_CACHE, KEEP_MIN: values read from the environment
            self.assertTrue((getattr(value, "__doc__", None) or "").strip(), f"pfx.{name} has no docstring")
            for attribute, member in vars(value).items() if isinstance(value, type) else ():
                if not attribute.startswith("_") and callable(member):
                    self.assertTrue((getattr(member, "__doc__", None) or "").strip(),
                                    f"pfx.{name}.{attribute} has no docstring")


if __name__ == "__main__":
    unittest.main()
