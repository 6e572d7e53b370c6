"""Runs the whole Python programs of a document and checks that each prints what the document shows:
a ```python block followed by a line "It prints:" and a ```text block is a program; it is run with this
interpreter (given ARG... as its command line) and must exit 0 and print exactly that text. The other
```python blocks are fragments and are not run.

    python3 run_doc_python.py DOC.md [ARG...]

Exits 1 when a program fails or prints something else, and when the document has no program (a
check that ran nothing); 77 (skipped) with the reason when NEEDS, a module a program imports, cannot
be imported: --needs NAME before DOC.md.
"""
from __future__ import annotations

import difflib
import importlib
import pathlib
import subprocess
import sys
import tempfile

from doc_snippets import blocks, shown_output


def main(argv: list) -> int:
    needs = []
    while len(argv) > 2 and argv[1] == "--needs":
        needs.append(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for name in needs:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001  (a package may fail to import in many ways)
            print(f"SKIPPED: {name} cannot be imported ({type(error).__name__}: {error})")
            return 77
    document = argv[1]
    lines = pathlib.Path(document).read_text(encoding="utf-8").splitlines()
    ran = 0
    for first, code, end in blocks(lines, "```python"):
        shown = shown_output(lines, end)
        if shown is None:
            continue  # a fragment
        where = f"{document}:{first}"
        with tempfile.TemporaryDirectory() as folder:
            program = pathlib.Path(folder) / "example.py"
            program.write_text("\n" * (first - 1) + "\n".join(code) + "\n", encoding="utf-8")  # the document's lines
            result = subprocess.run([sys.executable, str(program), *argv[2:]], capture_output=True, text=True,
                                    timeout=300, check=False, cwd=folder)
        if result.returncode != 0:
            print(f"{where}: the example exited with status {result.returncode}\n{result.stdout}{result.stderr}",
                  file=sys.stderr)
            return 1
        if result.stdout != shown[1]:
            diff = difflib.unified_diff(shown[1].splitlines(keepends=True), result.stdout.splitlines(keepends=True),
                                        fromfile=f"{document}:{shown[0]} (what the document says it prints)",
                                        tofile=f"{where} (what the example printed)")
            print("".join(diff), file=sys.stderr, end="")
            return 1
        print(f"{where}: the example printed the {shown[1].count(chr(10))} lines {document}:{shown[0]} shows")
        ran += 1
    if ran == 0:
        print(f"{document}: no ```python block followed by \"It prints:\" and a ```text block: nothing was run",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
