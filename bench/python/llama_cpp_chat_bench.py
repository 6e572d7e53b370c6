"""The price of exactness on llama-cpp-python's own Llama: multi-turn chats through create_completion,
served by a Llama without reuse (reset() before each call: every request cold), by stock Llama (its
own prefix reuse) and by a Llama under pfx's rule (pfx.integrations.llama_cpp.enable), in one run:
prompt tokens not evaluated (llama.cpp's own counters), time to first token, total time, and the
resumed responses that differ from their cold runs (tokens and logprobs, bit for bit).
docs/performance.md, "llama-cpp-python's Llama", shows its tables.

    python3 bench/python/llama_cpp_chat_bench.py [--model M.gguf] [--n-ubatch 32,128] [--n-ctx 4096]
        [--chats 3] [--turns 4] [--first 50,300] [--new 10,100] [--max-tokens 20] [--threads 1] [--seed 1]
        [--grid]

Without --model it writes the suites' tiny random-weight model (pfx.fixtures.tiny_gguf: 2 layers,
width 128, vocabulary 512, f16). A chat's first prompt has --first tokens (a range); each turn adds
the response and --new tokens (pfx.fixtures.llama_chats.turns). The cold configuration draws the
prompts (each turn holds the cold response) and the others serve the same ones. Every request is a
stream (greedy, logprobs=1): its time to first token is the time to its first chunk. n_batch is
llama-cpp-python's default (512), and so is flash attention (off): pfx's rule is enable's default,
chunk 1 with the prefill step n_ubatch, or with --grid the ubatch grid (enable(llm, chunk=n_ubatch), what
enable takes with flash attention on). Needs llama-cpp-python (scripts/llama.sh --python) and gguf; never
run by the tests. Exits 0 whatever the figures: a benchmark measures, it does not assert.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

CONFIGURATIONS = ("no reuse", "stock Llama", "Llama with pfx")


def serve(llm, prompt: list, cold: bool, max_tokens: int) -> dict:
    """One streamed request: its chunks, time to first chunk, prompt tokens evaluated, what it left."""
    from pfx.fixtures import llama_chats

    if cold:
        llm.reset()
    before = llama_chats.counters(llm)
    began = time.perf_counter()
    first = None
    chunks = []
    for chunk in llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, logprobs=1, stream=True):
        first = time.perf_counter() if first is None else first
        chunks.append(chunk["choices"])
    return {"chunks": chunks, "ttft_s": first - began, "evaluated": llama_chats.prompt_tokens_evaluated(llm, before, len(prompt)),
            "response": llama_chats.held_response(llm, prompt)}


def run(model: str, n_ubatch: int, arguments) -> dict:
    import llama_cpp

    from pfx.fixtures import llama_chats
    from pfx.integrations import llama_cpp as adapter

    results = {}
    plans = []  # the prompts of each chat, drawn by the cold configuration
    for configuration in CONFIGURATIONS:
        llm = llama_cpp.Llama(model, n_ctx=arguments.n_ctx, n_ubatch=n_ubatch, n_threads=arguments.threads,
                              n_threads_batch=arguments.threads, logits_all=True, verbose=False)
        llama_chats.warm_up(llm)
        rule = None
        if configuration == "Llama with pfx":
            rule = adapter.enable(llm, chunk=n_ubatch if arguments.grid else None)
            rule = (rule.chunk, rule.prefill_step)
        served = []
        began = time.perf_counter()
        for chat in range(arguments.chats):
            llm.reset()
            if configuration == "no reuse":
                next_prompt = llama_chats.turns(random.Random(f"{arguments.seed}:{chat}"), first=arguments.first,
                                                new=arguments.new)
                plans.append([])
            response = None
            for turn in range(arguments.turns):
                prompt = next_prompt(response) if configuration == "no reuse" else plans[chat][turn]
                outcome = serve(llm, prompt, configuration == "no reuse", arguments.max_tokens)
                if configuration == "no reuse":
                    plans[chat].append(prompt)
                response = outcome["response"]
                served.append(dict(outcome, prompt_length=len(prompt), turn=turn))
        results[configuration] = {"served": served, "total_s": time.perf_counter() - began,
                                  "n_batch": llm.n_batch, "rule": rule}
        llm.close()
    return results


def report(results: dict, n_ubatch: int, arguments) -> None:
    cold = results["no reuse"]["served"]
    prompt_tokens = sum(s["prompt_length"] for s in cold)
    resumed = [i for i, s in enumerate(cold) if s["turn"] > 0]
    print(f"n_ubatch {n_ubatch} (n_batch {results['no reuse']['n_batch']}, n_ctx {arguments.n_ctx}, "
          f"{arguments.threads} thread(s)): {arguments.chats} chats of {arguments.turns} turns, first prompts "
          f"{arguments.first[0]}..{arguments.first[1] - 1} tokens, {arguments.new[0]}..{arguments.new[1] - 1} new tokens "
          f"a turn, {arguments.max_tokens} generated, seed {arguments.seed}: {prompt_tokens} prompt tokens, "
          f"{len(resumed)} resumed turns; pfx's rule: chunk {results['Llama with pfx']['rule'][0]}, prefill step "
          f"{results['Llama with pfx']['rule'][1] or 'none'}")
    print(f"  {'configuration':16} {'prompt tokens not evaluated':>30} {'ttft median':>12} {'total':>9} "
          f"{'resumed responses differing from cold':>40}")
    reuse = {}
    for configuration in CONFIGURATIONS:
        served = results[configuration]["served"]
        reuse[configuration] = sum(s["prompt_length"] - s["evaluated"] for s in served)
        differing = sum(served[i]["chunks"] != cold[i]["chunks"] for i in resumed)
        ttft = statistics.median(s["ttft_s"] for s in served) * 1e3
        share = f"{reuse[configuration]} ({100 * reuse[configuration] / prompt_tokens:.0f}%)"
        print(f"  {configuration:16} {share:>30} {ttft:>9.1f} ms {results[configuration]['total_s']:>7.2f} s "
              f"{differing:>32} of {len(resumed)}")
    stock = reuse["stock Llama"]
    print(f"  pfx's reuse / stock's: {reuse['Llama with pfx'] / stock:.3f}" if stock else "  stock reused nothing")


def pair(text: str) -> tuple:
    low, high = (int(x) for x in text.split(","))
    return low, high + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF model (default: the suites' tiny random-weight one)")
    parser.add_argument("--n-ubatch", default="32,128", help="the n_ubatch values to run, comma-separated")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--chats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--first", type=pair, default=(50, 301), help="LOW,HIGH: the first prompt's tokens")
    parser.add_argument("--new", type=pair, default=(10, 101), help="LOW,HIGH: the new tokens of each turn")
    parser.add_argument("--max-tokens", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--grid", action="store_true",
                        help="pfx's rule on the ubatch grid (chunk n_ubatch), not enable's default")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        model = arguments.model
        if model is None:
            from pfx.fixtures import tiny_gguf

            model = os.path.join(folder, "tiny.gguf")
            tiny_gguf.write(model, kv_heads=2, dtype="f16", seed=1)
        for n_ubatch in (int(x) for x in arguments.n_ubatch.split(",")):
            report(run(model, n_ubatch, arguments), n_ubatch, arguments)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
