"""Runs one test module with unittest and writes a gtest-style XML report, so that the requirement
IDs each test verifies are collected with the C++ tests' (proptest/spec/requirements_check.cpp).

    python3 run_tests.py TEST_MODULE.py REPORT.xml
    python3 run_tests.py --skip REASON TEST_FILE REPORT.xml

Exits 1 when a test fails, errors, or declares no IDs; 77 (ctest's SKIP_RETURN_CODE) when every test
was skipped. Prints the random seed; PFX_PY_SEED=<seed> replays the run. With --skip (a build without
what the tests need) nothing is imported, built or run: every test of TEST_FILE, a Python module or a
C++ test program's source (proptest/support/test_names.py), is reported skipped with REASON, so that
the requirements check counts its tags as skipped in this run, not as tests that never ran.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
import unittest
from xml.sax.saxutils import escape, quoteattr

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "support")]

import support  # noqa: E402
from test_names import sentence, tests_in  # noqa: E402

SKIPPED = 77


class Recorder(unittest.TextTestResult):
    """Keeps, per test, how it ended and how long it took."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}  # test -> (kind, details)
        self.times = {}
        self._started = 0.0

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        self.times[test] = time.monotonic() - self._started
        self.outcomes.setdefault(test, ("passed", ""))
        super().stopTest(test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[test] = ("failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[test] = ("failure", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[test] = ("skipped", reason)


def report(result: Recorder, name: str) -> str:
    """The gtest XML layout: a failure comes before the properties, so a failed test vouches for nothing."""
    suites = {}
    for test in result.outcomes:
        suites.setdefault(type(test).__name__, []).append(test)
    failed = sum(kind == "failure" for kind, _ in result.outcomes.values())
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuites tests="{len(result.outcomes)}" failures="{failed}" name={quoteattr(name)}>']
    for suite, tests in suites.items():
        lines.append(f'  <testsuite name={quoteattr(suite)} tests="{len(tests)}">')
        for test in tests:
            kind, details = result.outcomes[test]
            method = getattr(test, test._testMethodName)
            ids = getattr(method, "verifies", "")
            status = {"passed": "completed", "failure": "completed", "skipped": "skipped"}[kind]
            lines.append(f'    <testcase name="{sentence(test._testMethodName)}" status="run" result="{status}" '
                         f'time="{result.times.get(test, 0.0):.3f}" classname="{suite}">')
            if kind == "failure":
                lines.append(f'      <failure message="failed">{escape(details)}</failure>')
            elif kind == "skipped":
                lines.append(f'      <skipped message={quoteattr(details)}/>')
            lines.append("      <properties>")
            lines.append(f'        <property name="verifies" value={quoteattr(ids)}/>')
            lines.append("      </properties>")
            lines.append("    </testcase>")
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def skipped_report(path: str, reason: str) -> str:
    """Every test of the file (Python or C++), read from its source, reported skipped."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', f'<testsuites name={quoteattr(os.path.basename(path))}>']
    for suite, name in tests_in(path):
        lines.append(f'  <testcase name="{name}" status="run" result="skipped" classname="{suite}">'
                     f'<skipped message={quoteattr(reason)}/></testcase>')
    return "\n".join(lines + ["</testsuites>"]) + "\n"


def write(xml: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(xml)), exist_ok=True)
    with open(xml, "w", encoding="utf-8") as out:
        out.write(text)


def main(argv: list) -> int:
    if len(argv) == 5 and argv[1] == "--skip":
        write(argv[4], skipped_report(argv[3], argv[2]))
        print(f"SKIPPED: {argv[2]}")
        return SKIPPED
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, xml = argv[1], argv[2]
    print(f"PFX_PY_SEED={support.SEED} (set it to replay this run)", flush=True)
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TextTestRunner(resultclass=Recorder, verbosity=2).run(suite)

    undeclared = [test.id() for test in result.outcomes
                  if not getattr(getattr(test, test._testMethodName), "verifies", "")]
    for test in undeclared:
        print(f"FAIL {test} declares no requirement IDs (@verifies)", file=sys.stderr)
    write(xml, report(result, os.path.basename(path)))
    if not result.wasSuccessful() or undeclared or result.testsRun == 0:
        print(f"FAILED; replay with PFX_PY_SEED={support.SEED}", file=sys.stderr)
        return 1
    if all(kind == "skipped" for kind, _ in result.outcomes.values()):
        return SKIPPED  # every test skipped (a missing optional package): ctest reports the suite skipped
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
