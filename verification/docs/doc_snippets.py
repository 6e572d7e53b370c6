"""Writes the C++ examples of the docs (```cpp blocks) as sources the tests' build compiles, so that an
example that no longer compiles fails the build, at the document's own line (#line).

    python3 doc_snippets.py OUT_DIR ROOT [--without-llama] DOC.md...    (DOC relative to ROOT)

A block with `int main` is a whole program: it is written alone, as a reader would copy it, with a
JSON file beside it that says where it is and what the document says it prints (the ```text block
right after it, behind a line "It prints:"), for run_doc_program.py to check. The other blocks of a
document are fragments: one source per document holds them in order, behind a prelude of pfx's
public headers, its classes at file scope and its statements each in a function whose parameters are
the names a fragment leaves to its reader (prompt, capacity, ...). With --without-llama, fragments
that use pfx::llama are left out. Prints the sources written, one per line, for CMake; exits 1 when
no example was found (a check that compiles nothing).
"""
from __future__ import annotations

import json
import pathlib
import re
import sys

PRELUDE = """#include <pfx/core.hpp>
#include <pfx/driver/environment.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/lane.hpp>
{llama}
#include <cstddef>
#include <memory>
#include <span>
#include <vector>
"""

# What fragments leave to their reader, as parameters of the function that holds each one.
READER_NAMES = ("[[maybe_unused]] std::vector<pfx::token> prompt, "
                "[[maybe_unused]] std::vector<pfx::token> prompt_and_generated, "
                "[[maybe_unused]] std::size_t capacity, [[maybe_unused]] std::size_t max_new_tokens")


def blocks(lines: list, fence: str = "```cpp", start_at: int = 0):
    """(line of the block's first line of code, its lines, line of its closing fence) for each block
    that opens with `fence`, from line `start_at` + 1 on."""
    start = None
    for number, line in enumerate(lines[start_at:], start_at + 1):
        if start is None and line.strip() == fence:
            start = number + 1
        elif start is not None and line.strip() == "```":
            yield start, lines[start - 1:number - 1], number
            start = None


def shown_output(lines: list, end: int):
    """What the document says the program whose block closes at line `end` prints: the next two
    lines that are not blank must be "It prints:" and a ```text fence, whose block is the output:
    (its first line, its text); None when the document shows no output right there."""
    following = (n for n in range(end, len(lines)) if lines[n].strip())
    said, fence = next(following, None), next(following, None)
    if fence is None or lines[said].strip() != "It prints:" or lines[fence].strip() != "```text":
        return None
    first, text, _ = next(blocks(lines, "```text", fence), (0, None, 0))
    return None if text is None else (first, "\n".join(text) + "\n")


def fragment(name: str, first: int, code: list, index: int) -> tuple:
    """The block's includes, and its code: at file scope when it declares, else in a function. An
    include's line is left blank, so that the code keeps the document's line numbers."""
    includes = [line for line in code if line.startswith("#include")]
    body = f'#line {first} "{name}"\n' + "\n".join("" if line.startswith("#include") else line for line in code)
    if any(re.match(r"(class|struct) \w+", line) for line in code):
        return includes, body + "\n"
    return includes, f"void fragment_{index}({READER_NAMES}) {{\n{body}\n}}\n"


def write(path: pathlib.Path, text: str) -> None:
    """Only when it changed: a configure that finds the docs as they were recompiles nothing."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def main(argv: list) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, root = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    without_llama = "--without-llama" in argv[3:]
    names = [a for a in argv[3:] if a != "--without-llama"]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        stem = re.sub(r"\W", "_", name.removesuffix(".md"))
        includes, parts = [], []
        lines = (root / name).read_text(encoding="utf-8").splitlines()
        for index, (first, code, end) in enumerate(blocks(lines)):
            text = "\n".join(code)
            if "int main(" in text:  # a whole program, compiled as it stands and run
                source = out / f"{stem}_{first}.cpp"
                write(source, f'#line {first} "{name}"\n{text}\n')
                shown = shown_output(lines, end)
                claim = {"document": name, "line": first, "output_line": shown[0] if shown else None,
                         "output": shown[1] if shown else None}
                write(source.with_suffix(".json"), json.dumps(claim, indent=2) + "\n")
                written.append(source)
                continue
            if without_llama and "pfx::llama" in text:
                continue
            block_includes, part = fragment(name, first, code, index)
            includes += block_includes
            parts.append(part)
        if parts:
            source = out / f"{stem}_fragments.cpp"
            prelude = PRELUDE.format(llama="" if without_llama else "#include <pfx/llama/engine.hpp>")
            write(source, prelude + "\n".join(dict.fromkeys(includes)) + "\n\n" + "\n".join(parts))
            written.append(source)
    kept = set(written) | {source.with_suffix(".json") for source in written}
    for stale in (set(out.glob("*.cpp")) | set(out.glob("*.json"))) - kept:  # no longer in the docs
        stale.unlink()
    if not written:
        print("doc_snippets.py: no ```cpp block in the documents given", file=sys.stderr)
        return 1
    print("\n".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
