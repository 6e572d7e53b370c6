"""Runs a whole program of the docs and checks what its document says of it: that it exits 0 and
prints exactly the output the document shows after it ("It prints:" and a ```text block). A document
that shows no output fails the check: it would have compared nothing but the exit status.

    python3 run_doc_program.py PROGRAM CLAIM.json    (CLAIM.json: written by doc_snippets.py)

Exits 1 with the document's lines and a diff when the program fails or prints something else, and
when the document shows no output.
"""
from __future__ import annotations

import difflib
import json
import pathlib
import subprocess
import sys


def main(argv: list) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    claim = json.loads(pathlib.Path(argv[2]).read_text(encoding="utf-8"))
    where = f"{claim['document']}:{claim['line']}"
    if claim["output"] is None:
        print(f"{where}: the document shows no output after the example (a line \"It prints:\", then a "
              "```text block with what it prints): nothing to compare it with", file=sys.stderr)
        return 1
    ran = subprocess.run([argv[1]], capture_output=True, text=True, timeout=60, check=False)
    if ran.returncode != 0:
        print(f"{where}: the example exited with status {ran.returncode}\n{ran.stdout}{ran.stderr}", file=sys.stderr)
        return 1
    if ran.stdout != claim["output"]:
        said = f"{claim['document']}:{claim['output_line']} (what the document says it prints)"
        diff = difflib.unified_diff(claim["output"].splitlines(keepends=True), ran.stdout.splitlines(keepends=True),
                                    fromfile=said, tofile=f"{where} (what the example printed)")
        print("".join(diff), file=sys.stderr, end="")
        return 1
    lines = claim["output"].count("\n")
    print(f"{where}: the example printed the {lines} lines {claim['document']}:{claim['output_line']} shows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
