"""pfx.PromptPrefix against the original Python class, in one run, on the same machine: the table of
docs/performance.md ("Python"). Standard library only (timeit); numpy rows when numpy is importable.

    python3 bench/python/bench_prompt_prefix.py [--tokens N] [--original PATH]

Each figure is the best of several repeats. A ratio under 1 means pfx is faster; each row names its
target (the issue's acceptance) and says whether it is met. Exits 0 whatever the figures: a
benchmark measures, it does not assert (the tests never assert timings).
"""
from __future__ import annotations

import argparse
import array
import gc
import importlib.util
import os
import random
import sys
import timeit
import tracemalloc


def load_original(path):
    """The original class's module: pfx.fixtures' verbatim copy, or the file at `path`."""
    if path is None:
        from pfx.fixtures import load_original as fixture
        return fixture()
    spec = importlib.util.spec_from_file_location("original_prompt_prefix", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best(statement, repeat: int = 5, number: int = 1) -> float:
    """Seconds per call: the best of `repeat` runs of `number` calls."""
    return min(timeit.repeat(statement, repeat=repeat, number=number)) / number


def per_call(statement, target_seconds: float = 0.2) -> float:
    """Seconds per call of a fast statement, with enough calls per run to be measurable."""
    number = max(1, int(target_seconds / max(best(statement, repeat=1, number=1), 1e-7)))
    return best(statement, repeat=5, number=number)


def shown(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    return f"{seconds * 1e3:.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000, help="held tokens (default 1,000,000)")
    parser.add_argument("--original", default=None,
                        help="the original class's file (default: pfx.fixtures.original_prompt_prefix)")
    args = parser.parse_args()
    for variable in ("TF_GLM53_PREFIX_CACHE", "TF_GLM53_PREFIX_CACHE_MIN"):
        os.environ.pop(variable, None)

    import pfx

    original_module = load_original(args.original)
    n = args.tokens
    rng = random.Random(7)
    held = [rng.randrange(1, 150_000) for _ in range(n)]
    extends = held + [5, 6, 7]
    differs_at_0 = [0] + held[1:] + [5, 6, 7]

    original, ours = original_module.PromptPrefix(), pfx.PromptPrefix()
    original.record(held, n)
    ours.record(held, n)
    assert original.offset_for(extends) == ours.offset_for(extends) == n
    assert original.offset_for(differs_at_0) == ours.offset_for(differs_at_0) == 0

    rows = []  # (what, original or baseline, pfx, ratio, target text, met)

    def row(what, base_name, base, mine, limit, target):
        ratio = mine / base if base else float("nan")
        rows.append((what, f"{shown(base)} ({base_name})" if base else base_name, shown(mine), ratio, target,
                     ratio <= limit if base else mine <= limit))

    t_orig = best(lambda: original.offset_for(extends))
    t_ours = best(lambda: ours.offset_for(extends), repeat=7)
    row("offset_for(list), prompt extends the record", "original", t_orig, t_ours, 1 / 3, "<= 1/3 of the original")

    t_orig = per_call(lambda: original.offset_for(differs_at_0))
    t_ours = per_call(lambda: ours.offset_for(differs_at_0))
    rows.append(("offset_for(list), prompt differs at token 0", f"{shown(t_orig)} (original)", shown(t_ours),
                 t_ours / t_orig, "<= 5 µs", t_ours <= 5e-6))

    # Buffers, against memcmp of the two sequences' bytes (bytes == bytes of equal content).
    held32 = array.array("i", held).tobytes()
    buffers = {"array('i')": array.array("i", extends), "array('l')": array.array("l", extends),
               "array('q')": array.array("q", extends), "memoryview (of array('i'))": memoryview(array.array("i", extends))}
    try:
        import numpy
    except ImportError:
        numpy = None
        print("numpy is not importable: its rows are left out", file=sys.stderr)
    if numpy is not None:
        buffers["numpy int32"] = numpy.asarray(extends, dtype=numpy.int32)
        buffers["numpy int64"] = numpy.asarray(extends, dtype=numpy.int64)
    for name, prompt in buffers.items():
        assert ours.offset_for(prompt) == n
        raw = memoryview(prompt).cast("B").tobytes()[: n * memoryview(prompt).itemsize]
        copy = bytes(bytearray(raw))
        t_memcmp = best(lambda: raw == copy, repeat=7)
        t_ours = best(lambda: ours.offset_for(prompt), repeat=7)
        row(f"offset_for({name})", "memcmp", t_memcmp, t_ours, 3, "<= 3x memcmp")
    del held32

    t_orig = best(lambda: original.record(extends, n))
    t_ours = best(lambda: ours.record(extends, n))
    row("record(list of 1M)" if n == 1_000_000 else f"record(list of {n})", "original", t_orig, t_ours, 2,
        "<= 2x the original")
    source = array.array("i", extends)
    target = bytearray(len(source) * 4)
    t_memcpy = best(lambda: target.__setitem__(slice(None), memoryview(source).cast("B")), repeat=7)
    t_ours = best(lambda: ours.record(source, n), repeat=7)
    row("record(array('i'))", "memcpy", t_memcpy, t_ours, 3, "<= 3x memcpy")
    ours.record(held, n)

    t_orig = per_call(lambda: original.ids)
    t_ours = per_call(lambda: ours.ids)
    rows.append(("reading p.ids", f"{shown(t_orig)} (original)", shown(t_ours), t_ours / t_orig, "O(1)",
                 t_ours < 10e-6))

    # Memory per held token: the original's list and its int objects, traced; pfx's machine.
    gc.collect()
    tracemalloc.start()
    fresh = original_module.PromptPrefix()
    before = tracemalloc.get_traced_memory()[0]
    fresh.record([rng.randrange(1, 150_000) for _ in range(n)], n)
    original_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    ours_bytes = ours._machine.memory_bytes
    rows.append(("memory per held token", f"{original_bytes / n:.1f} B (original)", f"{ours_bytes / n:.2f} B",
                 (ours_bytes / n) / (original_bytes / n), "<= 4 B", ours_bytes / n <= 4.01))

    print(f"pfx.PromptPrefix vs the original class, {n:,} held tokens, Python {sys.version.split()[0]}")
    print()
    print("| what | original / baseline | pfx | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    for what, base, mine, ratio, target, met in rows:
        print(f"| {what} | {base} | {mine} | {ratio:.3g} | {target} | {'yes' if met else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
