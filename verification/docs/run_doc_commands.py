"""Runs the `pfx` commands a document shows with their output, and checks that they print what it
shows: in a ``` block, a line `$ pfx ARGS` (optionally `| tail -N` or `| head -N`) is run with the
built program, and the lines after it, up to the next `$ ` line or the block's end, are what it must
print (standard error, then standard output, as a terminal shows them); `$ echo $?` then says the
exit status it must have. Times, speeds and their ratios differ from run to run: a number of seconds
or milliseconds, a ratio such as 3.06x and a table's two-decimal column compare as placeholders.
A command that names a file the document made elsewhere (a trace, a record) is not run, and said so.

    python3 run_doc_commands.py PFX_PROGRAM DOCUMENT.md...

Exits 1 with the document's line and a diff when a command prints something else or exits with
another status, and when the documents show no command at all (a check that compared nothing).
"""
from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile

VARIABLE = [
    (re.compile(r"\d+(\.\d+)? (s|ms)\b"), "# \\2"),      # times: "1.5 s", "104.0 ms"
    (re.compile(r"\d+\.\d+x\b"), "#x"),                  # ratios: "3.06x"
    (re.compile(r"(?<![\d.])\d+\.\d\d(?![\d.])"), "#"),  # a table's milliseconds: "1394.97"
]


def normalized(text: str) -> list:
    lines = []
    for line in text.splitlines():
        for pattern, placeholder in VARIABLE:
            line = pattern.sub(placeholder, line)
        lines.append(re.sub(r" +", " ", line).rstrip())
    return lines


def commands(path: str):
    """(line number, command, expected output, expected status or None) for each `$ pfx` line."""
    found = []
    in_block = False
    current = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith("```"):
                if in_block and current:
                    found.append(current)
                in_block, current = not in_block, None
                continue
            if not in_block:
                continue
            if line.startswith("$ pfx "):
                if current:
                    found.append(current)
                current = [number, line[2:], [], None]
            elif line == "$ echo $?" and current:
                current[3] = "next"
            elif current and current[3] == "next":
                current[3] = int(line)
            elif line.startswith("$ "):
                if current:
                    found.append(current)
                current = None
            elif current:
                current[2].append(line)
    return found


def main(argv: list) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    program, documents = os.path.abspath(argv[1]), argv[2:]
    compared = 0
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for document in documents:
            for number, command, expected, status in commands(document):
                where = f"{os.path.relpath(document)}:{number}"
                words = shlex.split(command)
                pipe = words.index("|") if "|" in words else len(words)
                arguments, filter_ = words[1:pipe], words[pipe + 1:]
                missing = [w for w in arguments if re.search(r"\.(jsonl|json|gguf)$", w) and not os.path.exists(w)]
                if missing:
                    print(f"{where}: not run: it reads {', '.join(missing)}, which the document makes elsewhere")
                    continue
                ran = subprocess.run([program] + arguments, cwd=work, capture_output=True, text=True, timeout=300,
                                     check=False)
                lines = (ran.stderr + ran.stdout).splitlines()
                if filter_[:1] == ["tail"]:
                    lines = lines[-int(filter_[1].lstrip("-")):]
                elif filter_[:1] == ["head"]:
                    lines = lines[:int(filter_[1].lstrip("-"))]
                compared += 1
                if normalized("\n".join(lines)) != normalized("\n".join(expected)):
                    failures += 1
                    diff = difflib.unified_diff(expected, lines, fromfile=f"{where} (what the document shows)",
                                                tofile=f"{command} (what it printed)", lineterm="")
                    print("\n".join(diff), file=sys.stderr)
                elif status is not None and ran.returncode != status:
                    failures += 1
                    print(f"{where}: `{command}` exited with {ran.returncode}; the document says {status}",
                          file=sys.stderr)
                else:
                    print(f"{where}: `{command}` printed the {len(expected)} lines the document shows")
    if compared == 0:
        print("no command of the documents was run: nothing was compared", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
