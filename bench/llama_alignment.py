#!/usr/bin/env python3
"""The price of alignment on llama.cpp, in one run: what pfx's rule (resume at a multiple of the
ubatch grid) costs next to llama.cpp's own rule (the whole common prefix minus one token) and next
to serving cold, on multi-turn chats of thousands of tokens (docs/engines.md, "The price of
alignment").

    python3 bench/llama_alignment.py [--pfx build/default/bin/pfx] [--chats 8192,16384,32768] [--turns 6]
                                     [--start 4000] [--chunk 64] [--threads 1] [--flash-attn on]
                                     [--seed 5] [--work DIR] [--json OUT]

It writes, from --seed, a tiny random-weight llama GGUF model (proptest/integrations/llama/
pfx.fixtures.tiny_gguf: 2 layers, 4 query heads over 2 KV heads, f16) and a trace of chats, one per
--chats entry, each growing turn by turn from --start tokens to that entry's length (each turn the
previous prompt plus new tokens, 8 generated). It serves the trace twice with
`pfx replay --engine llama --verify --json`, n_batch = n_ubatch = --chunk:

  (a) pfx's rule, rule chunk = the ubatch grid (--chunk);
  (b) llama.cpp's rule, rule chunk 1: every held token of the common prefix but the last;
  (c) cold, every request from position 0 in a second context: the cold side of run (a)'s --verify
      (run (b)'s own cold side gives its ratio).

Per request it prints the tokens recomputed (tokens of the common prefix with what the lane held
that were prefilled again: common prefix - offset; cold recomputes the whole common prefix) and the
time to first token of each, then the totals with the ratios resumed/cold and aligned/unaligned, and
how many of (b)'s responses differ from its cold run. Exits 0 whatever the figures (a benchmark
measures; the tests never assert timings), non-zero only when a run could not be made, or when
rule (a) served a response that differs from cold (that is a failure of pfx, not a figure).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WRITE_MODEL = os.path.join(ROOT, "python", "pfx", "fixtures", "tiny_gguf.py")
VOCAB = 512      # pfx.fixtures.tiny_gguf's default vocabulary; tokens 0..2 are its <unk>, <s>, </s>
GENERATED = 8    # tokens generated per request


def write_trace(path: str, lengths: list[int], turns: int, start: int, seed: int) -> None:
    """Each chat: `turns` prompts from `start` tokens to its length, each the previous plus new tokens."""
    rng = random.Random(seed)
    lines = []
    for chat, length in enumerate(lengths):
        prompt = [rng.randrange(3, VOCAB) for _ in range(start)]
        step = (length - start) / max(1, turns - 1)
        for turn in range(turns):
            lines.append(json.dumps({"prompt": prompt, "max_new_tokens": GENERATED, "label": f"chat {chat} turn {turn}"}))
            target = length if turn == turns - 2 else min(length, len(prompt) + int(step * rng.uniform(0.6, 1.4)))
            prompt = prompt + [rng.randrange(3, VOCAB) for _ in range(max(1, target - len(prompt)))]
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


def replay(args: argparse.Namespace, model: str, trace: str, capacity: int, rule_chunk: int) -> tuple[list[dict], dict]:
    command = [args.pfx, "replay", trace, "--engine", "llama", "--model", model, "--chunk", str(args.chunk),
               "--ubatch", str(args.chunk), "--threads", str(args.threads), "--flash-attn", args.flash_attn,
               "--capacity", str(capacity), "--rule-chunk", str(rule_chunk), "--verify", "--json", "--no-progress"]
    print("$ " + " ".join(command), file=sys.stderr, flush=True)
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    # 0: every response equal to cold; 1: some differ (expected of rule chunk 1). Anything else is an error.
    if run.returncode not in (0, 1):
        sys.exit(f"llama_alignment.py: pfx replay exited {run.returncode}:\n{run.stderr}")
    objects = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    requests = [o for o in objects if o.get("type") == "request"]
    summary = next(o for o in objects if o.get("type") == "summary")
    if any(r.get("failed") for r in requests):
        sys.exit("llama_alignment.py: a request failed:\n" + run.stdout)
    return requests, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pfx", default=os.path.join(ROOT, "build", "default", "bin", "pfx"))
    parser.add_argument("--chats", default="8192,16384,32768", help="each chat's final prompt length, comma-separated")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--start", type=int, default=4000)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--flash-attn", default="on", choices=["on", "off", "auto"])
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--work", help="folder for the model and trace (default: a temporary one)")
    parser.add_argument("--json", help="also write the per-request rows and totals here")
    args = parser.parse_args()
    lengths = [int(x) for x in args.chats.split(",") if x]
    if not lengths or min(lengths) <= args.start or args.turns < 2:
        parser.error("--chats needs lengths above --start, and --turns at least 2")
    if not os.access(args.pfx, os.X_OK):
        parser.error(f"no pfx program at {args.pfx} (build the target pfx_program, or pass --pfx)")

    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or scratch
        os.makedirs(work, exist_ok=True)
        model, trace = os.path.join(work, "gqa_f16.gguf"), os.path.join(work, "chats.jsonl")
        capacity = max(lengths) + 2 * GENERATED + args.chunk
        subprocess.run([sys.executable, WRITE_MODEL, model, "--kv-heads", "2", "--type", "f16", "--seed", "1",
                        "--ctx", str(capacity)], check=True)
        write_trace(trace, lengths, args.turns, args.start, args.seed)
        aligned, aligned_summary = replay(args, model, trace, capacity, args.chunk)
        unaligned, unaligned_summary = replay(args, model, trace, capacity, 1)

    rows = []
    for a, b in zip(aligned, unaligned, strict=True):
        rows.append({"label": a.get("label", str(a["request"])), "prompt_tokens": a["prompt_tokens"],
                     "common_prefix": a["common_prefix"],
                     "aligned": {"offset": a["offset"], "recomputed": a["common_prefix"] - a["offset"], "ttft_ms": a["ttft_ms"],
                                 "bitexact": a["bitexact"]},
                     "unaligned": {"offset": b["offset"], "recomputed": b["common_prefix"] - b["offset"], "ttft_ms": b["ttft_ms"],
                                   "bitexact": b["bitexact"], "cold_ttft_ms": b["cold_ttft_ms"]},
                     "cold": {"recomputed": a["common_prefix"], "ttft_ms": a["cold_ttft_ms"]}})

    print(f"chunk = n_batch = n_ubatch {args.chunk}, flash attention {args.flash_attn}, {args.threads} thread(s), "
          f"chats {args.chats} tokens from {args.start}, {args.turns} turns, {GENERATED} generated, seed {args.seed}")
    print(f"{'request':<16} {'prompt':>7} {'held':>7} | {'(a) pfx, rule chunk ' + str(args.chunk):^27} | "
          f"{'(b) llama.cpp, rule chunk 1':^34} | {'(c) cold':^18}")
    print(f"{'':<16} {'':>7} {'':>7} | {'recomputed':>10} {'ttft ms':>9} {'exact':>5} | "
          f"{'recomputed':>10} {'ttft ms':>9} {'equal to cold':>13} | {'recomputed':>10} {'ttft ms':>9}")
    for r in rows:
        a, b, c = r["aligned"], r["unaligned"], r["cold"]
        print(f"{r['label']:<16} {r['prompt_tokens']:>7} {r['common_prefix']:>7} | {a['recomputed']:>10} {a['ttft_ms']:>9.1f} "
              f"{'yes' if a['bitexact'] else 'NO':>5} | {b['recomputed']:>10} {b['ttft_ms']:>9.1f} "
              f"{'yes' if b['bitexact'] else 'NO':>13} | {c['recomputed']:>10} {c['ttft_ms']:>9.1f}")

    resumed = [r for r in rows if r["common_prefix"] > 0]
    def total(side: str, field: str, among: list[dict]) -> float:
        return sum(r[side][field] for r in among)
    totals = {
        "requests": len(rows), "resumed_requests": len(resumed),
        "recomputed": {s: total(s, "recomputed", rows) for s in ("aligned", "unaligned", "cold")},
        "ttft_ms": {s: total(s, "ttft_ms", rows) for s in ("aligned", "unaligned", "cold")},
        "unaligned_cold_ttft_ms": total("unaligned", "cold_ttft_ms", rows),
        "aligned_differ": sum(1 for r in rows if not r["aligned"]["bitexact"]),
        "unaligned_differ": sum(1 for r in rows if not r["unaligned"]["bitexact"]),
        "unaligned_differ_among_resumed": sum(1 for r in resumed if not r["unaligned"]["bitexact"]),
    }
    t, rc = totals["ttft_ms"], totals["recomputed"]
    totals["ratio_aligned_over_cold"] = t["aligned"] / t["cold"]
    totals["ratio_unaligned_over_cold"] = t["unaligned"] / totals["unaligned_cold_ttft_ms"]
    totals["ratio_aligned_over_unaligned"] = t["aligned"] / t["unaligned"]
    n = max(1, len(resumed))
    print(f"\ntotals over {len(rows)} requests ({len(resumed)} resumed):")
    print(f"  tokens recomputed: (a) {rc['aligned']} ({rc['aligned'] / n:.1f} per resumed request), "
          f"(b) {rc['unaligned']} ({rc['unaligned'] / n:.1f}), (c) cold {rc['cold']} ({rc['cold'] / n:.1f})")
    print(f"  time to first token: (a) {t['aligned']:.0f} ms, (b) {t['unaligned']:.0f} ms, (c) cold {t['cold']:.0f} ms "
          f"(run (b)'s own cold side: {totals['unaligned_cold_ttft_ms']:.0f} ms)")
    print(f"  resumed/cold: (a) {totals['ratio_aligned_over_cold']:.3f}, (b) {totals['ratio_unaligned_over_cold']:.3f}; "
          f"aligned/unaligned: {totals['ratio_aligned_over_unaligned']:.3f}")
    print(f"  responses that differ from cold: (a) {totals['aligned_differ']} of {len(rows)}, "
          f"(b) {totals['unaligned_differ']} of {len(rows)} ({totals['unaligned_differ_among_resumed']} of the "
          f"{len(resumed)} resumed)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"settings": vars(args), "rows": rows, "totals": totals,
                       "summaries": {"aligned": aligned_summary, "unaligned": unaligned_summary}}, out, indent=1)
    # Rule (a) must equal cold bit for bit (THM-1 on this engine); a difference is a failure, not a figure.
    return 1 if totals["aligned_differ"] > 0 else 0


if __name__ == "__main__":
    raise SystemExit(main())
