"""The price of exactness in llama.cpp's llama-server (scripts/llama.sh --server), and whether an
answer depends on what is batched beside it. docs/engines.md and docs/performance.md, "llama-server",
show its output.

    python3 bench/python/llama_server_bench.py [--model M.gguf] [--chats 3] [--first 500] [--last 4000]
        [--turn 700] [--max-tokens 24] [--threads 1] [--ubatch 32] [--flash-attn off] [--seed 1] [--batching 12]

Without --model it writes the suites' tiny random-weight model (pfx.fixtures.tiny_gguf: 2 layers,
width 128, vocabulary 512, f16). Each chat starts with a user message of about --first tokens and adds
the cold answer and about --turn tokens a turn until its prompt passes --last. Every turn is served
three ways, each on a server of its own started from the same binary: stock (no --pfx), pfx (--pfx
--pfx-alone: ggml's own CPU paths, on the grid or with the prefill step; llama_server_load_bench.py
prices the batch-invariant --pfx) and cold (`cache_prompt: false`: prefilled from row 0). Reuse is the server's own count
(usage.prompt_tokens_details.cached_tokens), time to first token its own prompt time
(timings.prompt_ms, prefill and first logits); an answer is compared with the cold one as text and
logprobs. --batching N then sends N pairs of different prompts to a --pfx --pfx-alone server with two
slots, each pair at once and each prompt again alone, and counts the answers that differ (0 turns it
off).
Needs the openai client; never run by the tests. Exits 0 whatever the figures.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORDS = ("sun", "river", "stone", "quiet", "market", "lamp", "north", "paper", "garden", "cloud", "iron", "song")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def server(binary: str, model: str, arguments: list, alias: str = "tiny", timeout: float = 600):
    """llama-server `binary` on `model` with `arguments`, on a free port of 127.0.0.1, until it answers
    /health: an openai client of it (the model named `alias`, requests of up to `timeout` seconds)."""
    import openai

    port = free_port()
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen([binary, "--model", model, "--host", "127.0.0.1", "--port", str(port), "--alias", alias,
                                "--no-warmup"] + arguments, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                log.seek(0)
                sys.exit(f"llama-server exited with status {process.returncode}:\n{log.read()[-3000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            if time.monotonic() > deadline:
                sys.exit("llama-server did not answer within 120 s")
            time.sleep(0.2)
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=timeout, max_retries=0)
    finally:
        process.terminate()
        process.wait()
        log.close()


def ask(client, messages: list, max_tokens: int, cold: bool = False) -> dict:
    response = client.chat.completions.create(model="tiny", messages=messages, max_tokens=max_tokens, temperature=0,
                                              logprobs=True, top_logprobs=1,
                                              extra_body={"cache_prompt": False} if cold else None)
    choice = response.choices[0]
    details = response.usage.prompt_tokens_details
    return {"answer": (choice.message.content, [(t.token, t.logprob) for t in choice.logprobs.content or []]),
            "text": choice.message.content, "prompt": response.usage.prompt_tokens,
            "cached": (details.cached_tokens or 0) if details else 0,
            "prompt_ms": float((response.model_extra or {}).get("timings", {}).get("prompt_ms", 0.0))}


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def chats(arguments, binary: str, model: str, settings: list) -> None:
    """The chats, planned on the cold server, then served by stock and pfx."""
    rng = random.Random(arguments.seed)
    plans = []
    with server(binary, model, settings) as cold:
        for _ in range(arguments.chats):
            # about 4.7 tokens a word with this model's tokenizer (a byte-level vocabulary of 512)
            messages = [{"role": "user", "content": text(rng, arguments.first * 3 // 14)}]
            turns = []
            while True:
                served = ask(cold, messages, arguments.max_tokens, cold=True)
                turns.append((list(messages), served))
                if served["prompt"] >= arguments.last:
                    break
                messages = messages + [{"role": "assistant", "content": served["text"]},
                                       {"role": "user", "content": text(rng, arguments.turn * 3 // 14)}]
            plans.append(turns)
    results = {}
    for name, extra in (("stock", []), ("pfx", ["--pfx", "--pfx-alone"])):
        with server(binary, model, settings + extra) as client:
            results[name] = [[ask(client, messages, arguments.max_tokens) for messages, _ in turns] for turns in plans]
    print(f"{'chat turn':>10} {'prompt':>7} | {'stock: cached  prompt ms  = cold':>34} | {'pfx: cached  prompt ms  = cold':>32} "
          f"| {'cold prompt ms':>14}")
    totals = {name: {"cached": 0, "ms": 0.0, "differ": 0} for name in ("stock", "pfx", "cold")}
    resumed = 0
    for c, turns in enumerate(plans):
        for t, (_, cold) in enumerate(turns):
            row = f"{c:>4} {t:>5} {cold['prompt']:>7} |"
            for name in ("stock", "pfx"):
                served = results[name][c][t]
                same = served["answer"] == cold["answer"]
                row += f" {served['cached']:>14} {served['prompt_ms']:>10.1f} {'yes' if same else 'NO':>7} |"
                if t > 0:
                    totals[name]["cached"] += served["cached"]
                    totals[name]["ms"] += served["prompt_ms"]
                    totals[name]["differ"] += not same
            print(row + f" {cold['prompt_ms']:>14.1f}")
            if t > 0:
                resumed += 1
                totals["cold"]["ms"] += cold["prompt_ms"]
    prompt_tokens = sum(cold["prompt"] for turns in plans for _, cold in turns[1:])
    stock, pfx, cold = totals["stock"], totals["pfx"], totals["cold"]
    print(f"\nresumed turns: {resumed}, {prompt_tokens} prompt tokens")
    print(f"  reused (cached_tokens): stock {stock['cached']}, pfx {pfx['cached']}; pfx/stock "
          f"{pfx['cached'] / max(stock['cached'], 1):.3f}")
    print(f"  time to first token (prompt_ms): stock {stock['ms']:.0f} ms, pfx {pfx['ms']:.0f} ms, cold {cold['ms']:.0f} ms; "
          f"pfx/stock {pfx['ms'] / max(stock['ms'], 1e-9):.3f}, pfx/cold {pfx['ms'] / max(cold['ms'], 1e-9):.3f}, "
          f"stock/cold {stock['ms'] / max(cold['ms'], 1e-9):.3f}")
    print(f"  responses that differ from cold: stock {stock['differ']} of {resumed}, pfx {pfx['differ']} of {resumed}")


def batching(arguments, binary: str, model: str, settings: list) -> None:
    """Pairs of prompts served at once on two slots, and each alone: do the answers depend on it?"""
    rng = random.Random(arguments.seed + 1)
    differ = text_differs = 0
    with server(binary, model, settings + ["--pfx", "--pfx-alone", "--parallel", "2"]) as client:
        for _ in range(arguments.batching):
            pair = [[{"role": "user", "content": text(rng, rng.randint(20, 300))}] for _ in range(2)]
            alone = [ask(client, messages, arguments.max_tokens, cold=True)["answer"] for messages in pair]
            together = [None, None]

            def serve(i: int) -> None:
                together[i] = ask(client, pair[i], arguments.max_tokens, cold=True)["answer"]

            threads = [threading.Thread(target=serve, args=(i,)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            differ += sum(a != b for a, b in zip(alone, together))
            text_differs += sum(a[0] != b[0] for a, b in zip(alone, together))
    print(f"\nbatching: {differ} of {2 * arguments.batching} answers served beside another request (two slots, "
          f"both at once) differ from the same request served alone, logprobs or text; {text_differs} in their text")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model")
    parser.add_argument("--chats", type=int, default=3)
    parser.add_argument("--first", type=int, default=500)
    parser.add_argument("--last", type=int, default=4000)
    parser.add_argument("--turn", type=int, default=700)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ubatch", type=int, default=32)
    parser.add_argument("--flash-attn", choices=("on", "off"), default="off")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batching", type=int, default=12)
    arguments = parser.parse_args()
    binary = subprocess.run([os.path.join(ROOT, "scripts", "llama.sh"), "--print-server"], capture_output=True,
                            text=True, check=True).stdout.strip()
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary} is not built: scripts/llama.sh --server builds it")
    with tempfile.TemporaryDirectory() as folder:
        model = arguments.model
        if model is None:
            model = os.path.join(folder, "gqa_f16.gguf")
            subprocess.run([sys.executable, os.path.join(ROOT, "python", "pfx", "fixtures", "tiny_gguf.py"), model,
                            "--kv-heads", "2", "--type", "f16", "--seed", "1"], check=True)
        settings = ["--ctx-size", str(2 * arguments.last + 4096), "--threads", str(arguments.threads), "--threads-batch",
                    str(arguments.threads), "--flash-attn", arguments.flash_attn, "--ubatch-size", str(arguments.ubatch),
                    "--batch-size", "512"]
        print(f"llama-server {binary}\nflash attention {arguments.flash_attn}, n_batch 512, n_ubatch {arguments.ubatch}, "
              f"{arguments.threads} thread(s), {arguments.chats} chats from {arguments.first} to {arguments.last}+ "
              f"tokens, about {arguments.turn} new a turn, {arguments.max_tokens} generated, seed {arguments.seed}")
        chats(arguments, binary, model, settings)
        if arguments.batching:
            batching(arguments, binary, model, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
