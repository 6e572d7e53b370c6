"""The price of batch invariance on vLLM's CPU build: decode throughput and time to first token with
vLLM's own kernels (stock: its attention splitting a request's KV by the whole step's work, its linear
layers one kernel call over the step's rows) and with pfx's batch-invariant kernels (PFX_VLLM=1: the
split off, every linear layer in calls of 16 rows, so that a request's answer does not depend on its
batch), side by side, at several requests in flight and context lengths. docs/performance.md, "vLLM:
batch invariance", shows its table.

    "$(scripts/vllm.sh --print-python)" bench/python/vllm_batch_bench.py [--layers N] [--contexts 512,2048,8192]
        [--in-flight 1,4,8] [--new-tokens N] [--repetitions N] [--rounds N] [--dtype bfloat16|float32] [--json]

The pfx side runs vLLM with pfx's plugin on and prefix caching off: the plugin then decides nothing
(this benchmark reuses nothing: every prompt is new) and changes only how vLLM computes, which is
what is priced. Each side runs in a process of its own, since the kernels are chosen when vLLM's
engine starts; --rounds alternates the two sides' processes that many times, so that other work on the
machine weighs on both alike. Each runs in vLLM's in-process mode (VLLM_ENABLE_V1_MULTIPROCESSING=0)
with two worker threads (VLLM_CPU_OMP_THREADS_BIND=0-1), in --dtype (default bfloat16, vLLM's choice
for a bfloat16 model),
on a random-weight Llama (pfx.fixtures.tiny_llama: hidden 128, 4 query heads of 32 over 2 KV heads,
--layers layers; nothing is downloaded). For each context length and count of requests in flight, the
requests (random prompts of that many tokens, greedy, ignore_eos, --new-tokens tokens each) are added
at once and served by the engine's step loop:

- time to first token: from the moment the requests are added to the step that returns a request's
  first token, the median over the requests of every repetition of every round;
- decode tokens/s: tokens generated from the step at which every request has its first token to the
  end, over that time (every request decoding, none prefilling), the median over the repetitions of
  every round.

A warm-up request runs before the measurements in each process. Exits 0 whatever the figures: a
benchmark measures, it does not assert.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

SIDES = {"stock": {}, "pfx": {"PFX_VLLM": "1"}}  # vLLM's own kernels, then pfx's batch-invariant ones
VOCAB = 512  # the tiny Llama's vocabulary


def serve(engine, params, prompts: list) -> tuple:
    """Adds `prompts` at once and steps the engine until all are done: (each request's time to first
    token in seconds, decode tokens/s once every request has its first token)."""
    from vllm.inputs import TokensPrompt

    began = time.perf_counter()
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{began}-{i}", TokensPrompt(prompt_token_ids=prompt), params)
    first = {}
    generated = {}
    decode_began = decode_tokens_before = None
    while engine.has_unfinished_requests():
        outputs = engine.step()
        now = time.perf_counter()
        for out in outputs:
            generated[out.request_id] = len(out.outputs[0].token_ids)
            if generated[out.request_id] and out.request_id not in first:
                first[out.request_id] = now - began
        if decode_began is None and len(first) == len(prompts):
            decode_began, decode_tokens_before = now, sum(generated.values())
    ended = time.perf_counter()
    decoded = sum(generated.values()) - decode_tokens_before
    return list(first.values()), decoded / (ended - decode_began) if ended > decode_began else float("nan")


def child(model: str, out_path: str, contexts: list, in_flight: list, new_tokens: int, repetitions: int,
          dtype: str) -> None:
    """Measures every (context, requests in flight) pair in this process, with the kernels the
    environment chooses (PFX_VLLM), and writes the figures to out_path."""
    import vllm

    max_len = max(contexts) + new_tokens
    # KV for every request in flight at the longest context, twice over: no preemption skews a figure.
    kv_bytes = 2 * max(in_flight) * max_len * 4 * 2 * 2 * 32 * model_layers(model)
    llm = vllm.LLM(model=model, skip_tokenizer_init=True, dtype=dtype, enable_prefix_caching=False,
                   max_model_len=max_len, max_num_seqs=max(in_flight), kv_cache_memory_bytes=max(kv_bytes, 64 << 20),
                   seed=0, enforce_eager=True)
    engine = llm.llm_engine
    params = vllm.SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True, detokenize=False)
    rng = random.Random(0)
    serve(engine, params, [[rng.randrange(VOCAB) for _ in range(64)]])  # warm-up
    rows = []
    for context in contexts:
        for count in in_flight:
            ttfts, rates = [], []
            for _ in range(repetitions):
                prompts = [[rng.randrange(VOCAB) for _ in range(context)] for _ in range(count)]
                ttft, rate = serve(engine, params, prompts)
                ttfts += ttft
                rates.append(rate)
            rows.append({"context": context, "in_flight": count, "ttft_s": ttfts, "decode_tokens_per_s": rates})
    scheduler = llm.llm_engine.vllm_config.scheduler_config
    with open(out_path, "w") as file:
        json.dump({"rows": rows, "max_num_batched_tokens": scheduler.max_num_batched_tokens,
                   "block_size": llm.llm_engine.vllm_config.cache_config.block_size}, file)


def model_layers(model: str) -> int:
    with open(os.path.join(model, "config.json")) as file:
        return json.load(file)["num_hidden_layers"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4, help="the random-weight Llama's layers")
    parser.add_argument("--contexts", default="512,2048,8192", help="prompt lengths in tokens, comma-separated")
    parser.add_argument("--in-flight", default="1,4,8", help="requests served at once, comma-separated")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repetitions", type=int, default=1, help="repetitions of each measurement in a process")
    parser.add_argument("--rounds", type=int, default=1, help="processes of each side, alternated")
    parser.add_argument("--dtype", default="bfloat16", help="vLLM's dtype (default bfloat16)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the markdown table")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    contexts = [int(n) for n in args.contexts.split(",")]
    in_flight = [int(n) for n in args.in_flight.split(",")]
    if args.child:
        child(args.child, args.out, contexts, in_flight, args.new_tokens, args.repetitions, args.dtype)
        return

    from pfx.fixtures.tiny_llama import write_tiny_llama

    folder = tempfile.mkdtemp(prefix="pfx-vllm-batch-bench-")
    model = write_tiny_llama(os.path.join(folder, "tiny-llama"), layers=args.layers, dtype=args.dtype,
                             max_positions=max(contexts) + args.new_tokens)
    results = {side: [] for side in SIDES}
    began = time.perf_counter()
    for side in [side for _ in range(args.rounds) for side in SIDES]:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PFX_VLLM")
                       and k != "VLLM_CPU_ATTN_SPLIT_KV"}
        environment.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_OMP_THREADS_BIND="0-1",
                           VLLM_LOGGING_LEVEL="ERROR", TOKENIZERS_PARALLELISM="false", **SIDES[side])
        out = os.path.join(folder, f"{side}-{len(results[side])}.json")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", model, "--out", out,
                        "--contexts", args.contexts, "--in-flight", args.in_flight, "--dtype", args.dtype,
                        "--new-tokens", str(args.new_tokens), "--repetitions", str(args.repetitions)],
                       env=environment, check=True)
        with open(out) as file:
            results[side].append(json.load(file))
    total = time.perf_counter() - began

    def medians(side: str, i: int) -> dict:
        """Row i of a side: the medians over its rounds' measurements, pooled."""
        runs = [run["rows"][i] for run in results[side]]
        return {name: statistics.median(value for run in runs for value in run[name])
                for name in ("ttft_s", "decode_tokens_per_s")}

    on = results["stock"][0]
    rows = [{"context": row["context"], "in_flight": row["in_flight"], "stock": medians("stock", i),
             "pfx": medians("pfx", i)} for i, row in enumerate(on["rows"])]
    setup = {"layers": args.layers, "dtype": args.dtype, "new_tokens": args.new_tokens, "repetitions": args.repetitions,
             "rounds": args.rounds, "max_num_batched_tokens": on["max_num_batched_tokens"],
             "block_size": on["block_size"], "total_s": total}
    if args.json:
        print(json.dumps({"setup": setup, "rows": rows}, indent=2))
        return
    print(f"random-weight Llama of {args.layers} layers (hidden 128), {args.dtype}, block {on['block_size']}, "
          f"max_num_batched_tokens {on['max_num_batched_tokens']}, {args.new_tokens} tokens generated a request, "
          f"{args.rounds} round(s) of {args.repetitions} repetition(s), two worker threads; {total:.0f} s in all\n")
    print("| context | in flight | TTFT, stock | TTFT, pfx | pfx/stock | decode tok/s, stock | "
          "decode tok/s, pfx | pfx/stock |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        a, b = row["stock"], row["pfx"]
        print(f"| {row['context']} | {row['in_flight']} | {1000 * a['ttft_s']:.0f} ms | {1000 * b['ttft_s']:.0f} ms | "
              f"{b['ttft_s'] / a['ttft_s']:.2f} | {a['decode_tokens_per_s']:.0f} | {b['decode_tokens_per_s']:.0f} | "
              f"{b['decode_tokens_per_s'] / a['decode_tokens_per_s']:.2f} |")


if __name__ == "__main__":
    main()
