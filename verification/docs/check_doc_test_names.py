"""Every test a document names exists: an auditor follows `Suite.Name` from docs/ and the folder
READMEs to the test, so a renamed or removed test must not leave its name behind.

    python3 check_doc_test_names.py SOURCE_DIR

The tests are read from the sources of proptest/ (C++ test programs and Python test modules) as
proptest/support/test_names.py reads them. A name in backticks whose suite is one of theirs must be
one of them. Exits 1, naming each file, line and name, when one is not; 1 too when no name was
checked at all (a check that compared nothing).
"""
from __future__ import annotations

import pathlib
import re
import sys

sys.dont_write_bytecode = True
# The tests' own reading of a test file (proptest/support/), so that a name counts here exactly when it
# is a test there.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "proptest" / "support"))

from test_names import tests_in  # noqa: E402

NAMED = re.compile(r"`([A-Z]\w*)\.([A-Z]\w*)`")


def tests(proptest: pathlib.Path) -> set:
    sources = sorted(proptest.rglob("*.cpp")) + sorted(proptest.rglob("test_*.py"))
    return {f"{suite}.{name}" for path in sources for suite, name in tests_in(path)}


def main(argv: list) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    known = tests(root / "proptest")
    suites = {name.split(".")[0] for name in known}
    documents = sorted(root.glob("docs/*.md")) + sorted(root.glob("README.md")) + sorted(root.glob("*/README.md"))
    checked, missing = 0, []
    for doc in documents:
        if doc.name == "traceability.md":  # generated from the tests' tags: right by construction
            continue
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for suite, name in NAMED.findall(line):
                if suite not in suites:
                    continue  # not a test: a Python attribute such as `pfx.Lane`, a file name
                checked += 1
                if f"{suite}.{name}" not in known:
                    missing.append(f"{doc.relative_to(root)}:{number}: `{suite}.{name}` names no test in proptest/")
    for problem in missing:
        print(problem, file=sys.stderr)
    if checked == 0:
        print("no document names a test: nothing was checked", file=sys.stderr)
        return 1
    print(f"{checked} names of tests in {len(documents)} documents, {len(known)} tests: "
          f"{len(missing)} name no test")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
