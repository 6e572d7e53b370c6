"""Reading llama.cpp's KV cache back through pfx.integrations.llama_cpp (llama-cpp-python), as a
bit-exactness check does: each row apart, from one read (LlamaCppEngine.read_each_row: one
llama_state_seq_get_data, parsed once) next to a read per row (one serialization of the whole
sequence per row), in one run: the Python rows of docs/performance.md ("A real engine").

    python3 bench/python/bench_llama_cpp_read.py MODEL.gguf [--rows 1024,2048] [--per-row-up-to 2048]

MODEL.gguf: any llama GGUF, such as the one python/pfx/fixtures/tiny_gguf.py writes.
Needs pfx (the build's python/ folder on PYTHONPATH, or installed) and llama-cpp-python. Each figure is
one read of the rows a prefill wrote; a read per row is skipped past --per-row-up-to (it grows with the
square of the rows). Exits 0 whatever the figures: a benchmark measures, it does not assert.
"""
from __future__ import annotations

import argparse
import time

from pfx.integrations.llama_cpp import LlamaCppEngine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--rows", default="1024,2048,4096")
    parser.add_argument("--per-row-up-to", type=int, default=2048)
    args = parser.parse_args()
    print(f"{'rows':>6} {'one read, split':>16} {'a read per row':>15}")
    for rows in (int(n) for n in args.rows.split(",")):
        engine = LlamaCppEngine(args.model, chunk=64, capacity=rows)
        tokens = [3 + i % 300 for i in range(rows)]
        for start in range(0, rows, 64):
            engine.prefill(tokens[start:start + 64], start)
        began = time.perf_counter()
        each = engine.read_each_row(0, rows)
        one = time.perf_counter() - began
        per_row = "skipped"
        if rows <= args.per_row_up_to:
            began = time.perf_counter()
            apart = [engine.read_rows(p, p + 1) for p in range(rows)]
            per_row = f"{1000 * (time.perf_counter() - began):.0f} ms"
            if apart != each:
                raise SystemExit("read_each_row differs from a read per row: a failure of pfx, not a figure")
        print(f"{rows:>6} {1000 * one:>13.1f} ms {per_row:>15}")


if __name__ == "__main__":
    main()
