"""llama-server under load: several requests decoded and prefilled together, each answer compared with
the same request served alone afterwards (docs/engines.md, "llama-server": "Under load").

The servers run on llama-server's own defaults: only the model, the context, the threads and the port
are given (and the alias the requests name, and no warm-up run), so `--parallel` is auto (4 slots),
flash attention auto, n_batch 2048 and n_ubatch 512. With --pfx every answer (text, finish reason and
the logprob of each token and its top alternatives) equals the same request served alone, first turns
and resumed turns, chat and completions, streamed or not; stock llama-server's differ, counted, so that
the comparison can fail.

Why stock differs whatever the model's random weights: on llama.cpp's CPU build a decode step that
holds two sequences multiplies f16 weights through llamafile's tiles, and one alone through vec_dot;
the two sum in different orders, and 52 of 64 outputs of such a product differ in their last bits
(ggml_batch_probe). An answer decoded beside another therefore differs in its logprobs unless no
decode step was shared, and the test requires that steps were shared (two streamed answers' parts
arrive interleaved) on both servers, so a run in which nothing was batched fails rather than passes.
A quiet draw beyond that needs every logprob of every stock answer to round the same way as alone: in
10 runs of this test's stock workload, 12 of 12 answers differed each time and all 3 turns were
decoded together, as every stock answer did in the measurements of docs/engines.md ("Under load").
"""
from __future__ import annotations

import os
import random
import sys
import threading
import time
import unittest

from support import verifies

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the suite's servers and comparisons
from test_llama_server import BINARY, COLD, MODEL, WHY_NOT, Server, cached, check_module, free_port

# llama-server's defaults but for what a user must give: the model (Server adds it, with the port), the
# context, the threads. 4 slots of a KV stream each under --pfx: 2048 tokens a slot.
DEFAULTS = ["--ctx-size", "8192", "--threads", "2", "--alias", "tiny", "--no-warmup"]
WORDS = ("sun", "river", "stone", "quiet", "market", "lamp", "north", "paper", "garden", "cloud", "iron", "song")
ANSWER = dict(model="tiny", temperature=0)


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def token_ids(rng: random.Random, n: int) -> list:
    return [rng.randrange(3, 500) for _ in range(n)]  # past <unk>, <s>, </s>


class Request:
    """One request as sent: a chat (messages) or a completion (a prompt of token ids or text), streamed or
    not. `serve` sends it and keeps the answer, the reuse the server reported and, streamed, the times
    its first and last parts arrived."""

    def __init__(self, kind: str, body, stream: bool, max_tokens: int = 32) -> None:
        self.kind, self.body, self.stream, self.max_tokens = kind, body, stream, max_tokens
        self.answer = None
        self.reused = 0
        self.sent = self.first = self.last = 0.0

    def call(self, server: Server, cold: bool = False):
        extra = dict(extra_body=COLD, max_tokens=self.max_tokens) if cold else dict(max_tokens=self.max_tokens)
        stream = self.stream and not cold
        if stream:
            extra["stream_options"] = {"include_usage": True}
        if self.kind == "chat":
            return server.client.chat.completions.create(messages=self.body, logprobs=True, top_logprobs=2,
                                                         stream=stream, **ANSWER, **extra)
        return server.client.completions.create(prompt=self.body, logprobs=2, stream=stream, **ANSWER, **extra)

    @staticmethod
    def tokens(logprobs) -> list:
        content = (logprobs.model_dump().get("content") if logprobs is not None else None) or []
        return [(t.get("id", t["token"]), t["logprob"], [(top.get("id", top["token"]), top["logprob"])
                                                        for top in t["top_logprobs"]]) for t in content]

    def answer_of(self, response) -> tuple:
        """(text, finish reason, logprobs) of a response, streamed (an iterator of parts) or not."""
        if not hasattr(response, "choices"):
            pieces, finish, logprobs, reused = [], None, [], 0
            for part in response:
                now = time.monotonic()
                if part.usage is not None and part.usage.prompt_tokens_details is not None:
                    reused = int(part.usage.prompt_tokens_details.cached_tokens or 0)
                if not part.choices:
                    continue
                choice = part.choices[0]
                piece = choice.delta.content if self.kind == "chat" else choice.text
                if piece:
                    self.first = self.first or now
                    self.last = now
                    pieces.append(piece)
                logprobs += self.tokens(choice.logprobs)
                finish = choice.finish_reason or finish
            return ("".join(pieces), finish, logprobs), reused
        choice = response.choices[0]
        content = choice.message.content if self.kind == "chat" else choice.text
        return (content, choice.finish_reason, self.tokens(choice.logprobs)), cached(response)

    def serve(self, server: Server) -> None:
        self.sent = time.monotonic()
        self.answer, self.reused = self.answer_of(self.call(server))

    def alone(self, server: Server) -> tuple:
        return self.answer_of(self.call(server, cold=True))[0]


def at_once(server: Server, requests: list, delays: list | None = None) -> None:
    """Sends the requests from threads of their own, all released at once, each `delays[i]` seconds
    after that where `delays` is given; the first failure is raised in the caller's thread."""
    failures = []
    start = threading.Barrier(len(requests))

    def send(i: int) -> None:
        start.wait()
        if delays:
            time.sleep(delays[i])
        try:
            requests[i].serve(server)
        except Exception as e:  # raised again below, in the caller's thread
            failures.append(e)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def decoded_together(a: Request, b: Request) -> bool:
    """Whether two streamed answers were being decoded at the same time: steps then held both."""
    return a.first < b.last and b.first < a.last


class Load:
    """Four conversations served together, turn after turn: a chat, a streamed chat, a completion of
    token ids and a streamed completion of text; then every request served alone, cold."""

    def __init__(self, seed: int, turns: int) -> None:
        self.rng = random.Random(seed)
        self.turns = turns
        self.served = []  # (turn, request)
        self.together = 0  # turns whose two streamed answers were decoded at the same time

    def run(self, server: Server) -> None:
        rng = self.rng
        # About 4.7 tokens a word (a byte-level vocabulary of 512): every prompt stays under a slot's 2048.
        chats = [[{"role": "user", "content": text(rng, rng.randrange(20, 120))}] for _ in range(2)]
        prompts = [token_ids(rng, rng.randrange(100, 600)), text(rng, rng.randrange(20, 120))]
        for turn in range(self.turns):
            requests = [Request("chat", list(chats[0]), False), Request("chat", list(chats[1]), True),
                        Request("completion", list(prompts[0]), False), Request("completion", prompts[1], True)]
            at_once(server, requests)
            self.together += decoded_together(requests[1], requests[3])
            self.served += [(turn, request) for request in requests]
            for chat, request in zip(chats, requests[:2]):
                chat += [{"role": "assistant", "content": request.answer[0]},
                         {"role": "user", "content": text(rng, rng.randrange(5, 40))}]
            prompts[0] += [t[0] for t in requests[2].answer[2]] + token_ids(rng, rng.randrange(10, 150))
            prompts[1] += requests[3].answer[0] + " " + text(rng, rng.randrange(5, 40))

    def compare(self, server: Server) -> dict:
        """Each request served alone, cold, one at a time: how many answers differ, first and resumed
        turns, and the prompt tokens the resumed turns took from the cache."""
        tally = dict(first=0, first_differ=0, resumed=0, resumed_differ=0, reused=0, example="")
        for turn, request in self.served:
            alone = request.alone(server)
            key = "first" if turn == 0 else "resumed"
            tally[key] += 1
            tally["reused"] += request.reused if turn > 0 else 0
            if alone != request.answer:
                tally[key + "_differ"] += 1
                tally["example"] = tally["example"] or (
                    f"turn {turn}, {request.kind}{' streamed' if request.stream else ''}: served "
                    f"{request.answer!r:.300}, alone {alone!r:.300}")
        return tally


def serve_load(arguments: list, seed: int = 1, turns: int = 3, settings: list = DEFAULTS) -> tuple:
    load = Load(seed, turns)
    with Server(arguments, settings) as server:
        load.run(server)
        tally = load.compare(server)
        log = server.output()
    return load, tally, log


@unittest.skipIf(WHY_NOT, WHY_NOT)
class LlamaServerUnderLoad(unittest.TestCase):
    @verifies("LLAMA-5")
    def test_four_requests_at_once_on_the_defaults_answer_as_served_alone_with_pfx_and_differ_with_stock(self):
        pfx, exact, log = serve_load(["--pfx"])
        stock, control, _ = serve_load([])
        print(f"--pfx: {exact['first_differ']} of {exact['first']} first turns and {exact['resumed_differ']} of "
              f"{exact['resumed']} resumed turns differ from alone, {exact['reused']} prompt tokens reused; "
              f"stock: {control['first_differ']} of {control['first']} and {control['resumed_differ']} of "
              f"{control['resumed']}, {control['reused']} reused; decoded together in {pfx.together} and "
              f"{stock.together} of {pfx.turns} turns")
        self.assertIn("pfx: the rule is on: chunk 1, prefill step 0, keep_min 0 (batch-invariant CPU paths, a KV "
                      "stream per slot of 2048 tokens)", log)
        self.assertIn("4 slots, each answer the same as its request served alone", log)
        self.assertGreater(pfx.together, 0, "no two answers were decoded at the same time: nothing was checked")
        self.assertEqual(exact["first_differ"] + exact["resumed_differ"], 0, exact["example"])
        self.assertGreater(stock.together, 0)
        self.assertGreater(control["first_differ"] + control["resumed_differ"], 0,
                           "stock's answers all equal alone: the check could not fail")
        self.assertGreater(exact["reused"], 0)
        self.assertGreaterEqual(exact["reused"], 0.5 * control["reused"])

    @verifies("LLAMA-5")
    def test_requests_arriving_while_another_prefills_or_decodes_answer_as_served_alone(self):
        # A long prompt (past n_batch 2048: prefilled in two calls), a short completion sent while it is
        # prefilled, and a chat sent once it decodes (its first part streamed back). Then its next turn,
        # resumed, beside a fresh request.
        rng = random.Random(7)
        with Server(["--pfx"], DEFAULTS[:1] + ["16384"] + DEFAULTS[2:]) as server:
            long = Request("chat", [{"role": "user", "content": text(rng, 560)}], True, 96)  # about 2600 tokens
            short = Request("completion", token_ids(rng, 300), False)
            late = Request("chat", [{"role": "user", "content": text(rng, 200)}], False)
            sent = []

            def when_decoding() -> None:
                deadline = time.monotonic() + 60
                while not long.first and time.monotonic() < deadline:
                    time.sleep(0.001)
                late.serve(server)
                sent.append(late)

            watcher = threading.Thread(target=when_decoding)
            watcher.start()
            at_once(server, [long, short], [0.0, 0.05])
            watcher.join()
            again = Request("chat", long.body + [{"role": "assistant", "content": long.answer[0]},
                                                 {"role": "user", "content": text(rng, 30)}], True)
            fresh = Request("completion", token_ids(rng, 900), True)
            at_once(server, [again, fresh])
            requests = [long, short, late, again, fresh]
            alone = [request.alone(server) for request in requests]
            differ = [i for i, request in enumerate(requests) if alone[i] != request.answer]
            log = server.output()
        for i in differ:
            print(f"request {i}: served {requests[i].answer!r:.600}\nalone {alone[i]!r:.600}")
        print(f"--pfx: {len(differ)} of {len(requests)} answers differ from alone; the long prompt's answer "
              f"streamed from {long.first:.3f} to {long.last:.3f}; its resumed turn reused {again.reused} tokens")
        self.assertEqual(sent, [late])
        self.assertLess(short.sent, long.first, "the short request arrived after the long prompt was prefilled")
        self.assertLess(late.sent, long.last, "the late request arrived after the long answer was decoded")
        self.assertEqual(differ, [], log[-3000:])
        self.assertGreater(again.reused, 0)

    @verifies("LLAMA-5 SERVE-1")
    def test_the_check_of_a_server_under_load_passes_with_pfx_and_fails_on_stock(self):
        import subprocess

        module = check_module(self)
        for arguments, status, words in ((["--pfx"], 0, "every check passed"), ([], 1, "\nMISMATCH: ")):
            with self.subTest(arguments=arguments), Server(arguments, DEFAULTS) as server:
                run = subprocess.run([sys.executable, "-m", module, "--url", f"http://127.0.0.1:{server.port}",
                                      "--concurrency", "4", "--turns", "3", "--max-new-tokens", "32", "--no-progress"],
                                     capture_output=True, text=True, timeout=600)
                self.assertEqual(run.returncode, status, run.stdout[-2000:] + run.stderr[-2000:])
                self.assertIn(words, run.stdout)
                self.assertIn("4 requests in flight, each compared with its cold run served alone", run.stdout)
                if status:  # a first turn differs too: no cache was read, only batches were shared
                    self.assertRegex(run.stdout, r"conversation \d, turn 1 .* NO: ")
                print(run.stdout.splitlines()[-2])

    @verifies("LLAMA-5")
    def test_a_unified_kv_cache_is_refused_by_name_and_served_only_with_pfx_alone(self):
        import subprocess

        run = subprocess.run([BINARY, "--model", MODEL, "--port", str(free_port()), "--pfx", "--parallel", "2", "--kv-unified"]
                             + DEFAULTS, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("llama-server --pfx: --kv-unified with 2 slots", run.stdout + run.stderr)
        self.assertIn("add --pfx-alone", run.stdout + run.stderr)
        # Asked for by llama.cpp's variable, on the defaults (--parallel auto): refused the same way.
        run = subprocess.run([BINARY, "--model", MODEL, "--port", str(free_port()), "--pfx"] + DEFAULTS,
                             capture_output=True, text=True, timeout=60, env=dict(os.environ, LLAMA_ARG_KV_UNIFIED="1"))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("llama-server --pfx: --kv-unified with 4 slots", run.stdout + run.stderr)
        with Server(["--pfx", "--pfx-alone", "--parallel", "2", "--kv-unified"], DEFAULTS) as server:
            log = server.output()
        self.assertIn("with --parallel 2, requests decoded at the same time share batches", log)
        run = subprocess.run([BINARY, "--model", MODEL, "--pfx-alone"] + DEFAULTS, capture_output=True, text=True,
                             timeout=60)
        self.assertIn("--pfx-alone is a setting of pfx's rule, which is off: add --pfx", run.stdout + run.stderr)


if __name__ == "__main__":
    unittest.main()
