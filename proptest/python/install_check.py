"""The module as a user installs it: `pip install .` into a fresh venv, the distribution pfx-prefix
(Apache-2.0, its LICENSE shipped) whose package is pfx, then every Python suite run against the
installed copy (not the build tree).

    python3 install_check.py SOURCE_DIR WORK_DIR SUITE.py...

The venv is made by the interpreter running this script (the python3 on PATH), with
--system-site-packages so that the suites see the numpy, hypothesis and torch installed for it;
pip builds the module with build isolation, taking scikit-build-core and pybind11 from the package
index, as a new user's `pip install .` does. Exits 77 (ctest's skip) with the reason when the
interpreter has no venv module or pip.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

SKIP = 77
# Prints the distribution's name, its license expression, its license files' names, and its packages.
DESCRIBE_DISTRIBUTION = """
from importlib import metadata
d = metadata.distribution("pfx-prefix")
licenses = [f.name for f in d.files if f.parent.name == "licenses"]
packages = sorted({f.parts[0] for f in d.files if f.suffix in (".py", ".so")})
print(d.metadata["Name"], d.metadata["License-Expression"], *licenses, *packages)
"""


def run(command, **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, **kwargs)


def main(argv: list) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    source, work, suites = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3:]
    for module in ("venv", "ensurepip", "pip"):
        if run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode != 0:
            print(f"SKIP: {sys.executable} cannot import {module}")
            return SKIP

    venv = os.path.join(work, "venv")
    shutil.rmtree(venv, ignore_errors=True)  # a fresh venv every run
    os.makedirs(work, exist_ok=True)
    if run([sys.executable, "-m", "venv", "--system-site-packages", venv]).returncode != 0:
        return 1
    python = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PFX_PYTHON_BUILD_DIR")}
    # CMake's folder is kept between runs (with ccache, a rebuild takes seconds); the venv is not.
    env["SKBUILD_BUILD_DIR"] = os.path.join(work, "cmake")
    install = run([python, "-m", "pip", "install", "--no-deps", source], env=env)
    if install.returncode != 0:
        print("FAIL: pip install did not succeed", file=sys.stderr)
        return 1

    located = run([python, "-c", "import pfx; print(pfx.__file__)"], env=env, capture_output=True, text=True,
                  cwd=work)
    site = os.path.join(venv, "lib")
    if located.returncode != 0 or not located.stdout.strip().startswith(site):
        print(f"FAIL: pfx is not imported from the venv: {located.stdout}{located.stderr}", file=sys.stderr)
        return 1

    # The distribution is pfx-prefix, Apache-2.0 with its LICENSE, and installs the package pfx
    # (the name pfx on the package index is another project's).
    described = run([python, "-c", DESCRIBE_DISTRIBUTION], env=env, capture_output=True, text=True, cwd=work)
    if described.returncode != 0 or described.stdout.split() != ["pfx-prefix", "Apache-2.0", "LICENSE", "pfx"]:
        print(f"FAIL: the installed distribution is not pfx-prefix, Apache-2.0 with its LICENSE, of the package "
              f"pfx: {described.stdout}{described.stderr}", file=sys.stderr)
        return 1

    # The server check is installed as a command of its own, beside python -m pfx.verify_server.
    command = os.path.join(os.path.dirname(python), "pfx-verify-server")
    helped = run([command, "--help"], env=env, capture_output=True, text=True, cwd=work) \
        if os.path.exists(command) else None
    if helped is None or helped.returncode != 0 or "usage: python -m pfx.verify_server" not in helped.stdout:
        print(f"FAIL: the installed command {command} does not run the server check: "
              f"{'missing' if helped is None else helped.stdout + helped.stderr}", file=sys.stderr)
        return 1

    env["PFX_PYTHON_INSTALLED"] = os.path.dirname(os.path.dirname(located.stdout.strip()))
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_tests.py")
    failed = []
    for suite in suites:
        name = os.path.splitext(os.path.basename(suite))[0]
        report = os.path.join(work, "reports", f"{name}.xml")  # not the suite's reports: no double count
        if run([python, runner, suite, report], env=env, cwd=work).returncode != 0:
            failed.append(name)
    if failed:
        print(f"FAIL against the installed copy: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"pip install into a fresh venv, then {len(suites)} suites against the installed copy: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
