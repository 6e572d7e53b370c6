"""What llama-server's batch-invariant CPU paths cost (docs/performance.md, "llama-server under load"):
prefill and decode tokens/s with --pfx (GGML_CPU_USE_REF: every row computed alone, a KV stream per
slot) against stock llama-server, from the same binary (scripts/llama.sh --server), side by side in one
run, with 1, 2 and 4 slots busy, on prompts of about 512, 2k and 8k tokens, for an f16 model and its
q4_K quantization.

    python3 bench/python/llama_server_load_bench.py [--lengths 512,2048,8192] [--busy 1,2,4]
        [--threads 2] [--max-tokens 32] [--layers 2] [--embd 256] [--ff 512]

The models are random (pfx.fixtures.tiny_gguf, width 256 so that q4_K quantizes every matrix; the q4_K
file is written by llama.cpp's own quantizer through llama-cpp-python). Each cell sends `busy` prompts
of one length at the same time (different token ids, cache_prompt false, so nothing is reused) and
reads the server's own timings: prefill tokens/s is the prompts' tokens over the longest prompt time
(timings.prompt_ms), decode tokens/s the sum of each request's generated tokens over its generation
time (timings.predicted_ms). The two servers (stock and --pfx) run at the same time on llama-server's
defaults (4 slots, flash attention auto, n_batch 2048, n_ubatch 512) with a context of 4 slots of the
longest prompt and the given threads, and take each cell in turn, --repeat times; a cell's figure is
its best run, the one a busy machine disturbed least. Needs the openai client; never run by the
tests. Exits 0 whatever the figures.
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

import llama_server_bench  # the server it starts: this folder's, beside it

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def server(binary: str, model: str, arguments: list):
    """llama_server_bench's server, its model named "m", with time for an 8k prompt on a busy machine."""
    return llama_server_bench.server(binary, model, arguments, alias="m", timeout=1800)


def cell(client, rng: random.Random, length: int, busy: int, max_tokens: int) -> tuple:
    """`busy` prompts of `length` token ids at once: (prefill tokens/s, decode tokens/s)."""
    prompts = [[rng.randrange(3, 500) for _ in range(length)] for _ in range(busy)]
    timings = [None] * busy
    start = threading.Barrier(busy)

    def send(i: int) -> None:
        start.wait()
        response = client.completions.create(model="m", prompt=prompts[i], max_tokens=max_tokens, temperature=0,
                                             extra_body={"cache_prompt": False, "ignore_eos": True})
        timings[i] = (response.model_extra or {}).get("timings", {})

    threads = [threading.Thread(target=send, args=(i,)) for i in range(busy)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    prefill = sum(t["prompt_n"] for t in timings) / (max(t["prompt_ms"] for t in timings) / 1000.0)
    decode = sum(t["predicted_n"] / (t["predicted_ms"] / 1000.0) for t in timings)
    return prefill, decode


def models(arguments, folder: str) -> list:
    f16 = os.path.join(folder, "f16.gguf")
    subprocess.run([sys.executable, os.path.join(ROOT, "python", "pfx", "fixtures", "tiny_gguf.py"), f16,
                    "--layers", str(arguments.layers), "--embd", str(arguments.embd), "--heads", str(arguments.embd // 64),
                    "--kv-heads", str(max(1, arguments.embd // 128)), "--ff", str(arguments.ff), "--ctx", "65536",
                    "--type", "f16", "--seed", "1"], check=True)
    q4_k = os.path.join(folder, "q4_K.gguf")
    # In a process of its own: the quantizer prints every tensor it writes.
    quantize = ("import llama_cpp, sys; p = llama_cpp.llama_model_quantize_default_params(); "
                "p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M; "
                "sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p))")
    if subprocess.run([sys.executable, "-c", quantize, f16, q4_k], capture_output=True).returncode != 0:
        sys.exit("llama.cpp's quantizer (llama-cpp-python) failed to write the q4_K model")
    return [("f16", f16), ("q4_K", q4_k)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="512,2048,8192")
    parser.add_argument("--busy", default="1,2,4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=256)
    parser.add_argument("--ff", type=int, default=512)
    arguments = parser.parse_args()
    binary = subprocess.run([os.path.join(ROOT, "scripts", "llama.sh"), "--print-server"], capture_output=True,
                            text=True, check=True).stdout.strip()
    lengths = [int(n) for n in arguments.lengths.split(",")]
    busy = [int(n) for n in arguments.busy.split(",")]
    context = 4 * (max(lengths) + arguments.max_tokens + 64)
    print(f"llama-server {binary}; {os.cpu_count()} cores, --threads {arguments.threads}; random models of "
          f"{arguments.layers} layers, width {arguments.embd}, feed-forward {arguments.ff}; --ctx-size {context}; "
          f"{arguments.max_tokens} tokens generated a request; the best of {arguments.repeat} runs a cell")
    began = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for kind, model in models(arguments, folder):
            figures = {}
            settings = ["--ctx-size", str(context), "--threads", str(arguments.threads)]
            with server(binary, model, settings) as stock, server(binary, model, settings + ["--pfx"]) as pfx:
                rng = random.Random(1)
                for _ in range(arguments.repeat):
                    for length in lengths:
                        for b in busy:
                            for name, client in (("stock", stock), ("pfx", pfx)):
                                best = figures.get((name, length, b), (0.0, 0.0))
                                now = cell(client, rng, length, b, arguments.max_tokens)
                                figures[(name, length, b)] = (max(best[0], now[0]), max(best[1], now[1]))
            for length in lengths:
                for b in busy:
                    stock, pfx = figures[("stock", length, b)], figures[("pfx", length, b)]
                    rows.append((kind, length, b, stock, pfx))
    print(f"\n| model | prompt | slots busy | prefill tok/s stock | --pfx | ratio | decode tok/s stock | --pfx | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, length, b, stock, pfx in rows:
        print(f"| {kind} | {length} | {b} | {stock[0]:.0f} | {pfx[0]:.0f} | {pfx[0] / stock[0]:.2f} | "
              f"{stock[1]:.0f} | {pfx[1]:.0f} | {pfx[1] / stock[1]:.2f} |")
    print(f"\n{time.monotonic() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
