"""The price of exactness on vLLM: one chat workload served by vLLM without prefix caching (every
request cold), by stock vLLM's prefix caching, and by vLLM with pfx's plugin (PFX_VLLM=1), batch
invariant (its default) and on vLLM's own kernels (PFX_VLLM_BATCH_INVARIANT=0), in one run: tokens
taken from the cache, time to first token, total time, and responses that differ from the cold ones
(tokens or logprobs, bit for bit). docs/performance.md, "vLLM", shows its tables.

    "$(scripts/vllm.sh --print-python)" bench/python/vllm_chat_bench.py [--model DIR | --kinds full,hybrid]
        [--steps N] [--workloads N] [--seed N] [--long-prefill-token-threshold N] [--max-num-scheduled-tokens N]
        [--dtype float32|bfloat16] [--block-size N] [--certify]

Without --model it writes the vLLM suites' tiny random-weight Llamas (pfx.fixtures.tiny_llama), one of
each kind --kinds names: "full" (every layer full attention), "hybrid" (layer 0 a sliding window of
64 positions, layer 1 full attention: two KV cache groups) and "sliding" (both layers sliding), and
serves the same prompts on each. --long-prefill-token-threshold and --max-num-scheduled-tokens set
vLLM's scheduler as named, for every configuration.
The workload is the vLLM suites' chat workload (pfx.fixtures.workloads.chat_workload): turns that
hold earlier responses, regenerations, edits, new sessions and shorter prompts, greedy, 12 tokens a
response. Each configuration runs in a process of its own (the plugin is chosen when vLLM starts), in
vLLM's in-process mode with two worker threads (VLLM_CPU_OMP_THREADS_BIND=0-1), on the same prompts:
the cold configuration draws them (each turn holds the cold response) and the others replay them.
The batch-invariant plugin makes vLLM compute on pfx's kernels (its attention's KV split off, its
linear layers in calls of 16 rows), so its responses are compared with a cold run on those kernels
(the plugin on, prefix caching off); the others with the cold run on vLLM's own. The plugin on vLLM's
own kernels (PFX_VLLM_BATCH_INVARIANT=0) runs in float32 only: in bfloat16 the plugin refuses them.

With --certify, ``python -m pfx.integrations.vllm.conform --certify`` first certifies each model's
configuration (pfx's kernels, the dtype and block size given, in a process of its own), and one more
configuration serves under that certificate (PFX_VLLM_CERTIFICATE): where it proves rows decode wrote
exact, the plugin reuses them as stock vLLM does (docs/engines.md, "Certified decode rows").

A second table says where pfx's reuse falls short of stock vLLM's, summed over the requests: the
tokens of stock's hits past the rows the cache holds under pfx (blocks that decode wrote into, which
pfx never caches: stock's hit less vLLM's longest hit in pfx's cache), the tokens the prefill-step premise cut
(hits the plugin's decisions() counts as "lowered_for_the_prefill_step": held less taken), and the
rest (the chunk grid, keep_min, the token left to compute: held less taken, for the other hits).
Needs vLLM's environment (scripts/vllm.sh) with pfx installed in it (scripts/vllm.sh --install-pfx .).
Exits 0 whatever the figures: a benchmark measures, it does not assert.
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

BLOCK = 32  # the vLLM suites' engine: vLLM's CPU attention takes block sizes that are multiples of 32
MAX_NUM_BATCHED_TOKENS = 256
PFX_KERNELS = {"PFX_VLLM": "1"}  # with prefix caching off the plugin decides nothing: its kernels alone
CONFIGURATIONS = {  # name: (prefix caching, environment, the cold configuration it is compared with)
    "no prefix caching": (False, {}, "no prefix caching"),
    "no prefix caching, pfx's kernels": (False, PFX_KERNELS, "no prefix caching, pfx's kernels"),
    "stock vLLM": (True, {}, "no prefix caching"),
    "vLLM with pfx": (True, {"PFX_VLLM": "1"}, "no prefix caching, pfx's kernels"),
    "vLLM with pfx, vLLM's kernels": (True, {"PFX_VLLM": "1", "PFX_VLLM_BATCH_INVARIANT": "0"}, "no prefix caching"),
    # With --certify: PFX_VLLM_CERTIFICATE, the model's certificate, is added when it runs.
    "vLLM with pfx, certified": (True, {"PFX_VLLM": "1"}, "no prefix caching, pfx's kernels"),
}
MAX_NEW_TOKENS = 12
KINDS = {"full": None, "hybrid": ("sliding", "full"), "sliding": ("sliding", "sliding")}  # the tiny models' layers
WINDOW = 64


def child(configuration: str, model: str, plan_path: str, out_path: str, steps: int, workloads: int,
          seed: int, scheduler: dict, dtype: str, block: int) -> None:
    """Serves the workload in this process under `configuration` and writes what it saw to out_path:
    with the plugin on, each request's decision counters too (in-process mode: the decisions are taken
    in this process)."""
    import vllm
    from vllm.inputs import TokensPrompt

    from pfx.fixtures.workloads import chat_workload
    from pfx.integrations.vllm import decisions

    caching = CONFIGURATIONS[configuration][0]
    llm = vllm.LLM(model=model, skip_tokenizer_init=True, dtype=dtype, enable_prefix_caching=caching,
                   block_size=block, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                   max_model_len=4096, kv_cache_memory_bytes=256 << 20, seed=0, enforce_eager=True,
                   disable_log_stats=False, **scheduler)
    params = vllm.SamplingParams(max_tokens=MAX_NEW_TOKENS, temperature=0.0, logprobs=1, detokenize=False,
                                 ignore_eos=True)
    plan = None
    if os.path.exists(plan_path):
        with open(plan_path) as file:
            plan = json.load(file)
    served = []
    began = time.perf_counter()
    for workload in range(workloads):
        next_step = chat_workload(random.Random(f"{seed}:{workload}"))
        response = ()
        for step in range(steps):
            prompt = plan[len(served)]["prompt"] if plan else list(next_step(response).prompt)
            before = decisions()
            out = llm.generate([TokensPrompt(prompt_token_ids=prompt)], params, use_tqdm=False)[0]
            counted = decisions() - before
            completion = out.outputs[0]
            response = tuple(completion.token_ids)
            served.append({"prompt": prompt, "tokens": list(response),
                           "logprobs": [s[t].logprob for s, t in zip(completion.logprobs, completion.token_ids)],
                           "cached": out.num_cached_tokens or 0,
                           "held": counted["tokens_held"], "lowered": counted["lowered_for_the_prefill_step"],
                           "ttft_s": out.metrics.first_token_latency if out.metrics else float("nan")})
    total = time.perf_counter() - began
    with open(out_path, "w") as file:
        json.dump({"served": served, "total_s": total}, file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a model directory (default: the tiny Llamas of --kinds)")
    parser.add_argument("--kinds", default="full,hybrid", help="the tiny models to write: full, hybrid")
    parser.add_argument("--steps", type=int, default=12, help="requests per chat workload")
    parser.add_argument("--workloads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--long-prefill-token-threshold", type=int, default=None)
    parser.add_argument("--max-num-scheduled-tokens", type=int, default=None)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="the model's and vLLM's dtype (vLLM's default for a bfloat16 model: bfloat16)")
    parser.add_argument("--block-size", type=int, default=BLOCK,
                        help=f"vLLM's block size, and so the plugin's chunk (default {BLOCK}; vLLM's own on CPU: 128)")
    parser.add_argument("--certify", action="store_true",
                        help="certify each model's configuration with conform first, and serve under it too")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--plan", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    scheduler = {name: value for name, value in (("long_prefill_token_threshold", args.long_prefill_token_threshold),
                                                 ("max_num_scheduled_tokens", args.max_num_scheduled_tokens))
                 if value is not None}
    scheduler_arguments = [argument for name, value in scheduler.items()
                           for argument in (f"--{name.replace('_', '-')}", str(value))]
    if args.child:
        child(args.child, args.model, args.plan, args.out, args.steps, args.workloads, args.seed, scheduler,
              args.dtype, args.block_size)
        return

    folder = tempfile.mkdtemp(prefix="pfx-vllm-chat-bench-")
    models = {"model": args.model} if args.model else {}
    for kind in ([] if args.model else args.kinds.split(",")):
        if kind not in KINDS:
            parser.error(f"--kinds: {kind!r} is none of {', '.join(KINDS)}")
        from pfx.fixtures.tiny_llama import write_tiny_llama
        models[kind] = write_tiny_llama(os.path.join(folder, f"tiny-llama-{kind}"), dtype=args.dtype,
                                        layer_types=KINDS[kind],
                                        sliding_window=WINDOW if KINDS[kind] else None)
    results = {}
    for kind, model in models.items():
        plan = os.path.join(folder, f"plan-{kind}.json")  # turns hold this model's own cold responses
        certificate = os.path.join(folder, f"certificate-{kind}.json")
        if args.certify:
            certified = subprocess.run([sys.executable, "-m", "pfx.integrations.vllm.conform", model, "--dtype",
                                        args.dtype, "--block-size", str(args.block_size), "--max-num-batched-tokens",
                                        str(MAX_NUM_BATCHED_TOKENS), "--max-model-len", "4096", "--certify", certificate,
                                        *scheduler_arguments],
                                       env={**{k: v for k, v in os.environ.items() if not k.startswith("PFX_VLLM")},
                                            "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "0-1",
                                            "VLLM_LOGGING_LEVEL": "ERROR"},
                                       capture_output=True, text=True)  # conform checks stock vLLM: no plugin
            print(certified.stdout.strip().splitlines()[-1] if certified.stdout.strip() else certified.stderr[-2000:])
        for name, (_, variables, _) in CONFIGURATIONS.items():
            if variables.get("PFX_VLLM_BATCH_INVARIANT") == "0" and args.dtype != "float32":
                continue  # vLLM's own kernels in bfloat16: the plugin refuses them without a certificate
            if name.endswith("certified"):
                if not os.path.exists(certificate):
                    continue  # not asked for, or conform's verdict was not safe: nothing certified
                variables = dict(variables, PFX_VLLM_CERTIFICATE=certificate)
            environment = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_OMP_THREADS_BIND="0-1",
                               VLLM_LOGGING_LEVEL="ERROR", TOKENIZERS_PARALLELISM="false")
            for variable in ("PFX_VLLM", "PFX_VLLM_CHUNK", "PFX_VLLM_KEEP_MIN", "PFX_VLLM_BATCH_INVARIANT",
                             "PFX_VLLM_CERTIFICATE", "VLLM_CPU_ATTN_SPLIT_KV"):
                environment.pop(variable, None)
            environment.update(variables)
            out = os.path.join(folder, f"{len(results)}.json")
            subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, "--model", model, "--plan",
                            plan, "--out", out, "--steps", str(args.steps), "--workloads", str(args.workloads),
                            "--seed", str(args.seed), "--dtype", args.dtype, "--block-size", str(args.block_size),
                            *scheduler_arguments], env=environment, check=True)
            with open(out) as file:
                results[kind, name] = json.load(file)
            if not os.path.exists(plan):  # the cold run drew the prompts: the model's others replay them
                with open(plan, "w") as file:
                    json.dump(results[kind, name]["served"], file)

    print(f"{args.workloads} chat workloads of {args.steps} requests a model, {MAX_NEW_TOKENS} tokens generated each, "
          f"seed {args.seed}, {args.dtype}, block {args.block_size}"
          f"{''.join(f', {name} {value}' for name, value in scheduler.items())}\n")
    print("| model | configuration | tokens reused | time to first token (median) | total time | "
          "responses differing from cold |")
    print("|---|---|---|---|---|---|")
    for (kind, name), result in results.items():
        cold = results[kind, CONFIGURATIONS[name][2]]["served"]  # the model's cold answers, on the same kernels
        served = result["served"]
        prompt_tokens = sum(len(s["prompt"]) for s in served)
        reused = sum(s["cached"] for s in served)
        ttft = statistics.median(s["ttft_s"] for s in served)
        print(f"| {kind} | {name} | {reused} ({100 * reused / prompt_tokens:.0f}%) | {1000 * ttft:.1f} ms | "
              f"{result['total_s']:.1f} s | {differing(served, cold)} of {len(served)} |")
    for kind in models:
        split_on = results[kind, "no prefix caching"]["served"]
        split_off = results[kind, "no prefix caching, pfx's kernels"]["served"]
        print(f"\n{kind}: the cold runs on pfx's batch-invariant kernels differ from those on vLLM's in "
              f"{differing(split_off, split_on)} of {len(split_on)} responses")

    print("\nWhere pfx's reuse falls short of stock vLLM's, in tokens summed over the requests:\n")
    print("| model | configuration | reuse, pfx/stock | short of stock | in blocks decode wrote into | "
          "prefill-step premise | rest (grid, keep_min) |")
    print("|---|---|---|---|---|---|---|")
    for (kind, name), result in results.items():
        if "PFX_VLLM" not in CONFIGURATIONS[name][1]:
            continue
        stock, served = results[kind, "stock vLLM"]["served"], result["served"]
        short = sum(b["cached"] - s["cached"] for s, b in zip(served, stock))
        decode_blocks = sum(max(0, b["cached"] - s["held"]) for s, b in zip(served, stock))
        step = sum(s["held"] - s["cached"] for s in served if s["lowered"])
        stock_reused = sum(b["cached"] for b in stock)
        ratio = sum(s["cached"] for s in served) / stock_reused if stock_reused else float("nan")
        print(f"| {kind} | {name} | {ratio:.2f} | {short} | {decode_blocks} | {step} | {short - decode_blocks - step} |")


def differing(served: list, cold: list) -> int:
    """How many responses differ from their cold ones, tokens or logprobs, bit for bit."""
    return sum((s["tokens"], s["logprobs"]) != (c["tokens"], c["logprobs"]) for s, c in zip(served, cold))


if __name__ == "__main__":
    main()
