"""The module as a user installs it: `pip install --no-build-isolation .` into a fresh venv, offline,
then every Python suite run against the installed copy (not the build tree).

    python3 install_check.py SOURCE_DIR WORK_DIR SUITE.py...

The venv is made by /usr/bin/python3 (Debian's, whose python3-setuptools, python3-wheel and
python3-numpy it sees through --system-site-packages, since no package index is reachable). Exits 77
(ctest's skip) with the reason when that interpreter, its venv module or pip is missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

SKIP = 77
DEBIAN_PYTHON = "/usr/bin/python3"


def run(command, **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, **kwargs)


def main(argv: list) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    source, work, suites = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3:]
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        print(f"SKIP: {DEBIAN_PYTHON} is missing (Debian's python3)")
        return SKIP
    for module, package in (("venv", "python3-venv"), ("ensurepip", "python3-venv"), ("pip", "python3-pip"),
                            ("setuptools", "python3-setuptools"), ("wheel", "python3-wheel")):
        if run([DEBIAN_PYTHON, "-c", f"import {module}"], capture_output=True).returncode != 0:
            print(f"SKIP: {DEBIAN_PYTHON} cannot import {module} (install Debian's {package})")
            return SKIP

    venv = os.path.join(work, "venv")
    shutil.rmtree(venv, ignore_errors=True)  # a fresh venv every run
    os.makedirs(work, exist_ok=True)
    if run([DEBIAN_PYTHON, "-m", "venv", "--system-site-packages", venv]).returncode != 0:
        return 1
    python = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PFX_PYTHON_BUILD_DIR")}
    # CMake's folder is kept between runs (with ccache, a rebuild takes seconds); the venv is not.
    env["PFX_CMAKE_BUILD_DIR"] = os.path.join(work, "cmake")
    install = run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                   "--no-cache-dir", source], env=env)
    if install.returncode != 0:
        print("FAIL: pip install did not succeed", file=sys.stderr)
        return 1

    located = run([python, "-c", "import pfx; print(pfx.__file__)"], env=env, capture_output=True, text=True,
                  cwd=work)
    site = os.path.join(venv, "lib")
    if located.returncode != 0 or not located.stdout.strip().startswith(site):
        print(f"FAIL: pfx is not imported from the venv: {located.stdout}{located.stderr}", file=sys.stderr)
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
