"""llama.cpp's own llama-server, built with pfx's rule (scripts/llama.sh --server; PFX_LLAMA_SERVER
names the binary), driven by the official openai client over /v1/completions and
/v1/chat/completions, on the model pfx.fixtures.tiny_gguf writes (PFX_LLAMA_MODEL), greedy.

Each resumed response is compared with a cold run of the same request (`cache_prompt: false`, which
makes the server prefill from row 0), text, finish reason and logprobs. With --pfx none differs; the
same server without --pfx (stock llama-server) serves resumed turns that differ, counted, so that the
comparison can fail. Reuse is the server's own count, usage.prompt_tokens_details.cached_tokens.

Every server binds only 127.0.0.1, on a free port, is waited for at most a minute and stopped at the
end of its test. Skipped, with the reason, where the binary was not built, the openai client is not
installed (pip install openai) or no model was written.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

from support import verifies

MODEL = os.environ.get("PFX_LLAMA_MODEL", "")
BINARY = os.environ.get("PFX_LLAMA_SERVER", "")
STARTUP_SECONDS = 60


def why_not() -> str:
    import importlib.util

    if not BINARY or not os.access(BINARY, os.X_OK):
        return (f"llama-server with pfx's rule is not built ({BINARY or 'PFX_LLAMA_SERVER unset'}); "
                "scripts/llama.sh --server builds it")
    if importlib.util.find_spec("openai") is None:
        return "the openai client is not installed: pip install openai (scripts/install-deps.sh installs it)"
    if not MODEL:
        return "no model: PFX_LLAMA_MODEL names the GGUF file pfx.fixtures.tiny_gguf writes"
    return ""


WHY_NOT = why_not()
if not WHY_NOT:
    import openai

# One thread, flash attention off, ubatches of 32 in calls of 512. With --pfx the CPU backend computes
# each row alone (its batch-invariant paths): chunk 1, no prefill step. With --pfx-alone (ggml's own
# paths) the rule's default is chunk 1 with the prefill step 32 (docs/engines.md, "llama-server").
# FLASH_ATTENTION: on, ubatches of 64, where llama.cpp's tiled flash attention makes a row's bits depend
# on its ubatch's size: with --pfx-alone, the grid 64.
SETTINGS = ["--ctx-size", "2048", "--threads", "1", "--threads-batch", "1", "--flash-attn", "off",
            "--ubatch-size", "32", "--batch-size", "512", "--alias", "tiny", "--no-warmup"]
FLASH_ATTENTION = ["--flash-attn", "on", "--ubatch-size", "64"]
DECISION = re.compile(r"pfx: prompt of (\d+) tokens: the slot held (\d+) of it, the rule allows (\d+) ")
COLD = {"cache_prompt": False}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_module(test) -> str:
    """The server check's module, pfx.verify_server; `test` skipped, saying why, where it does not import."""
    import importlib.util
    module = "pfx.verify_server"
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:
        found = False
    if not found:
        test.skipTest(f"{module} does not import here: pfx's Python module is not built")
    return module


class Server:
    """llama-server on 127.0.0.1 with `arguments`, its output in a file."""

    def __init__(self, arguments: list, settings: list = SETTINGS) -> None:
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        command = [BINARY, "--model", MODEL, "--host", "127.0.0.1", "--port", str(self.port)] + settings + arguments
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="none", timeout=120,
                                    max_retries=0)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def __enter__(self):
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if self.process.poll() is not None:
                output = self.output()
                self.stop()
                raise AssertionError(f"llama-server exited with status {self.process.returncode}:\n{output[-3000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as response:
                    if response.status == 200:
                        return self
            if time.monotonic() > deadline:
                output = self.output()
                self.stop()
                raise AssertionError(f"llama-server did not answer within {STARTUP_SECONDS} s:\n{output[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __exit__(self, *exception) -> None:
        self.stop()


def chat_answer(choice) -> tuple:
    """A chat answer as compared: its text, finish reason, and each token's logprob and top logprobs."""
    logprobs = [(t.token, t.logprob, [(top.token, top.logprob) for top in t.top_logprobs])
                for t in (choice.logprobs.content or [])] if choice.logprobs else None
    return choice.message.content, choice.finish_reason, logprobs


def cached(response) -> int:
    """The prompt tokens the server took from its KV cache, by its own count."""
    details = response.usage.prompt_tokens_details
    return int(details.cached_tokens) if details is not None and details.cached_tokens is not None else 0


SUBJECTS = ("a cat and a dog", "the sea", "a long walk")  # fixed chats: each outcome is reproducible
ARGUMENTS = dict(model="tiny", max_tokens=24, temperature=0, logprobs=True, top_logprobs=2)


class Tally:
    """Resumed turns compared with their cold runs, and the reuse the server reported for them."""

    def __init__(self) -> None:
        self.compared = self.differing = self.reused = self.prompt_tokens = 0
        self.first_difference = ""

    def add(self, label: str, resumed, cold, resumed_response) -> None:
        self.compared += 1
        self.reused += cached(resumed_response)
        self.prompt_tokens += resumed_response.usage.prompt_tokens
        if resumed != cold:
            self.differing += 1
            self.first_difference = self.first_difference or f"{label}: resumed {resumed!r:.300}, cold {cold!r:.300}"


def chat_turns(server: Server, subject: str, tally: Tally, turns: int = 4, **extra):
    """A multi-turn chat, a turn each time it is resumed: each turn served resumed, then cold; the next
    turn appends the answer and a new question, so that its prompt runs past the rows the answer's
    decode wrote."""
    messages = [{"role": "system", "content": "you answer briefly"},
                {"role": "user", "content": f"tell me about {subject} " * 3}]
    for turn in range(turns):
        resumed = server.client.chat.completions.create(messages=messages, **ARGUMENTS, **extra)
        cold = server.client.chat.completions.create(messages=messages, **ARGUMENTS, **extra, extra_body=COLD)
        if turn > 0:
            tally.add(f"{subject}, turn {turn}", chat_answer(resumed.choices[0]), chat_answer(cold.choices[0]), resumed)
        messages += [{"role": "assistant", "content": cold.choices[0].message.content},
                     {"role": "user", "content": "and then? " * (turn + 2)}]
        yield turn


def chat(server: Server, subject: str, tally: Tally, turns: int = 4, **extra) -> None:
    for _ in chat_turns(server, subject, tally, turns, **extra):
        pass


def completion_answer(choice) -> tuple:
    """A completion as compared: its text, finish reason, and each token's id, logprob and top logprobs
    (llama-server returns them as chat completions do, in logprobs.content)."""
    content = (choice.logprobs.model_dump().get("content") if choice.logprobs else None) or []
    assert content, "the server returned no logprobs for a completion with logprobs=1"
    return choice.text, choice.finish_reason, [(t["id"], t["logprob"], [(top["id"], top["logprob"])
                                                                        for top in t["top_logprobs"]]) for t in content]


def completions(server: Server, tally: Tally, turns: int = 4, **extra) -> None:
    """/v1/completions: each prompt the previous one, its answer and new text (past decode's rows)."""
    prompt = "once upon a time " * 6
    arguments = dict(model="tiny", max_tokens=20, temperature=0, logprobs=1)
    for turn in range(turns):
        resumed = server.client.completions.create(prompt=prompt, **arguments, **extra)
        cold = server.client.completions.create(prompt=prompt, **arguments, **extra, extra_body=COLD)
        if turn > 0:
            tally.add(f"completion turn {turn}", completion_answer(resumed.choices[0]),
                      completion_answer(cold.choices[0]), resumed)
        prompt += cold.choices[0].text + " and then " * (turn + 1)


def serve_chats(arguments: list) -> tuple:
    tally = Tally()
    with Server(arguments) as server:
        for subject in SUBJECTS:
            chat(server, subject, tally)
        completions(server, tally)
        log = server.output()
    return tally, log


@unittest.skipIf(WHY_NOT, WHY_NOT)
class LlamaServer(unittest.TestCase):
    @verifies("LLAMA-5")
    def test_multi_turn_chats_resume_exactly_with_pfx_and_differ_with_stock(self):
        invariant = "chunk 1, prefill step 0, keep_min 0 (batch-invariant CPU paths, a KV stream per slot of 2048 tokens)"
        cases = [([], [], invariant), ([], FLASH_ATTENTION, invariant),
                 (["--pfx-alone"], [], "chunk 1, prefill step 32, keep_min 0 (--pfx-alone: flash attention off, "
                                       "n_batch 512, n_ubatch 32)"),
                 (["--pfx-alone"], FLASH_ATTENTION, "chunk 64, prefill step 0, keep_min 0 (--pfx-alone: flash attention "
                                                    "on or auto, n_batch 512, n_ubatch 64)")]
        stocks = {}
        for alone, settings, rule in cases:
            with self.subTest(alone=alone, settings=settings):
                pfx, log = serve_chats(["--parallel", "1", "--pfx"] + alone + settings)
                if tuple(settings) not in stocks:
                    stocks[tuple(settings)] = serve_chats(["--parallel", "1"] + settings)[0]
                stock = stocks[tuple(settings)]
                self.assertIn(f"pfx: the rule is on: {rule}", log)
                decisions = [tuple(map(int, d)) for d in DECISION.findall(log)]
                self.assertGreater(len(decisions), 0, log[-3000:])
                for prompt, held, reused in decisions:
                    self.assertLessEqual(reused, min(held, prompt - 1))
                    if not alone:  # any offset: every row computed alone
                        continue
                    if settings:  # the grid
                        self.assertEqual(reused % 64, 0)
                    else:  # the prefill step 32 (INV-12): the resumed prefill ends with a one-row ubatch iff cold's does
                        self.assertTrue(reused == 0 or ((prompt - reused - 1) % 32 == 0) == ((prompt - 1) % 32 == 0))
                if not alone:  # somewhere off any grid: a resume the ubatch-dependent paths could not serve
                    self.assertTrue(any(reused % 32 for _, _, reused in decisions), decisions)
                print(f"{' '.join(settings) or 'flash attention off'}: pfx: {pfx.differing} of {pfx.compared} resumed "
                      f"responses differ from cold, {pfx.reused} of {pfx.prompt_tokens} prompt tokens reused; stock: "
                      f"{stock.differing} of {stock.compared} differ, {stock.reused} reused")
                self.assertEqual(pfx.compared, stock.compared)
                self.assertGreater(pfx.compared, 0)
                self.assertEqual(pfx.differing, 0, pfx.first_difference)
                self.assertGreater(stock.differing, 0, "stock's resumed responses all equal cold: the check could not fail")
                self.assertGreater(pfx.reused, 0)
                self.assertGreaterEqual(pfx.reused, 0.5 * stock.reused)

    @verifies("LLAMA-5")
    def test_streaming_stop_sequences_and_a_client_that_disconnects_resume_exactly(self):
        with Server(["--pfx", "--parallel", "1"]) as server:
            messages = [{"role": "user", "content": "stream a story " * 8}]
            first = server.client.chat.completions.create(messages=messages, **ARGUMENTS, extra_body=COLD)
            messages += [{"role": "assistant", "content": first.choices[0].message.content},
                         {"role": "user", "content": "go on " * 5}]
            # Streamed and resumed, against a cold run not streamed.
            parts = server.client.chat.completions.create(messages=messages, model="tiny", max_tokens=24,
                                                          temperature=0, stream=True)
            streamed = "".join(part.choices[0].delta.content or "" for part in parts if part.choices)
            cold = server.client.chat.completions.create(messages=messages, **ARGUMENTS, extra_body=COLD)
            self.assertEqual(streamed, cold.choices[0].message.content)
            # A stop sequence taken from the cold answer: the resumed answer stops at the same place.
            text = cold.choices[0].message.content
            stop = text[len(text) // 2: len(text) // 2 + 2]
            self.assertTrue(stop.strip(), f"no stop sequence to take from {text!r}")
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "more " * 4}]
            messages_stop = messages[:-2]
            resumed = server.client.chat.completions.create(messages=messages_stop, **ARGUMENTS, stop=[stop])
            cold_stop = server.client.chat.completions.create(messages=messages_stop, **ARGUMENTS, stop=[stop],
                                                              extra_body=COLD)
            self.assertEqual(resumed.choices[0].finish_reason, "stop")
            self.assertEqual(chat_answer(resumed.choices[0]), chat_answer(cold_stop.choices[0]))
            # A client that closes its stream after a few parts; the next turn resumes exactly.
            with server.client.chat.completions.create(messages=messages, model="tiny", max_tokens=400,
                                                       temperature=0, stream=True) as parts:
                for _ in zip(range(3), parts):
                    pass
            time.sleep(0.5)
            messages += [{"role": "assistant", "content": "so"}, {"role": "user", "content": "and after? " * 3}]
            resumed = server.client.chat.completions.create(messages=messages, **ARGUMENTS)
            cold = server.client.chat.completions.create(messages=messages, **ARGUMENTS, extra_body=COLD)
            self.assertEqual(chat_answer(resumed.choices[0]), chat_answer(cold.choices[0]))
            self.assertGreater(cached(resumed), 0)

    @verifies("LLAMA-5")
    def test_two_slots_serve_interleaved_chats_exactly(self):
        # Two chats taking turns, one request at a time, on two slots with their own KV streams and, with
        # --pfx-alone, on one unified KV buffer: slot selection by the rule's offset sends each turn to the
        # slot that holds its chat.
        for unified in ([], ["--kv-unified", "--pfx-alone"]):
            with self.subTest(unified=unified):
                tally = Tally()
                with Server(["--pfx", "--parallel", "2"] + unified) as server:
                    turns = [chat_turns(server, subject, tally) for subject in SUBJECTS[:2]]
                    for _ in zip(*turns):  # one turn of each chat in turn
                        pass
                    log = server.output()
                self.assertGreater(tally.compared, 0)
                self.assertEqual(tally.differing, 0, tally.first_difference)
                self.assertGreater(tally.reused, 0, log[-3000:])
                if unified:  # requests decoded at the same time share batches, which changes their logprobs: said
                    self.assertIn("with --parallel 2, requests decoded at the same time share batches", log)
                else:
                    self.assertIn("2 slots, each answer the same as its request served alone", log)

    @verifies("LLAMA-5")
    def test_a_prompt_prefilled_beside_another_request_publishes_no_rows(self):
        # Two chats' first turns sent at once to two slots: each prompt is prefilled in batches that hold
        # the other's tokens too, on other ubatches than alone. The next turns, served alone, must still
        # equal their cold runs: with --pfx-alone the record keeps none of those rows; with --pfx they are
        # the rows a prefill alone writes, and kept.
        for alone in (["--pfx-alone"], []):
            with self.subTest(alone=alone):
                self.prefilled_beside_another_request(alone)

    def prefilled_beside_another_request(self, alone: list) -> None:
        tally = Tally()
        with Server(["--pfx", "--parallel", "2", "--ctx-size", "4096"] + alone + FLASH_ATTENTION) as server:
            chats = [[{"role": "user", "content": f"tell me about {subject} " * (30 + 20 * i)}]
                     for i, subject in enumerate(SUBJECTS[:2])]
            first = [None, None]

            def serve(i: int) -> None:
                first[i] = server.client.chat.completions.create(messages=chats[i], **ARGUMENTS)

            threads = [threading.Thread(target=serve, args=(i,)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for turn in range(1, 3):
                for i, messages in enumerate(chats):
                    messages += [{"role": "assistant", "content": first[i].choices[0].message.content},
                                 {"role": "user", "content": "and then? " * (turn + 2)}]
                    resumed = server.client.chat.completions.create(messages=messages, **ARGUMENTS)
                    cold = server.client.chat.completions.create(messages=messages, **ARGUMENTS, extra_body=COLD)
                    tally.add(f"chat {i}, turn {turn}", chat_answer(resumed.choices[0]), chat_answer(cold.choices[0]),
                              resumed)
                    first[i] = cold
        self.assertEqual(tally.differing, 0, tally.first_difference)
        self.assertGreater(tally.reused, 0)

    @verifies("LLAMA-5")
    def test_the_host_prompt_cache_brings_a_chat_back_with_its_record_and_resumes_it_exactly(self):
        # One slot, two chats taking turns: each turn finds the slot holding the other chat, which the
        # server saves into its prompt cache (--cache-ram) while it loads this chat's saved state back.
        with Server(["--pfx", "--parallel", "1", "--cache-ram", "64"]) as server:
            chats = {subject: [{"role": "user", "content": f"tell me about {subject} " * 4}] for subject in SUBJECTS[:2]}
            served = []
            for turn in range(4):
                for subject, messages in chats.items():
                    response = server.client.chat.completions.create(messages=messages, **ARGUMENTS)
                    served.append((list(messages), response))
                    messages += [{"role": "assistant", "content": response.choices[0].message.content},
                                 {"role": "user", "content": "and then? " * (turn + 2)}]
            cold = [server.client.chat.completions.create(messages=messages, **ARGUMENTS, extra_body=COLD)
                    for messages, _ in served]
            log = server.output()
        for (messages, resumed), alone in zip(served, cold):
            self.assertEqual(chat_answer(resumed.choices[0]), chat_answer(alone.choices[0]), messages[-1])
        # Each turn takes back the rows of its chat's previous prompt, less at most a ubatch (the prefill step).
        reused = [cached(resumed) for _, resumed in served[2:]]
        before = [resumed.usage.prompt_tokens for _, resumed in served[:-2]]
        print(f"reused {reused} of the previous prompts' {before} tokens")
        self.assertTrue(all(r >= b - 32 for r, b in zip(reused, before)), f"{reused} {before}\n{log[-3000:]}")

    @verifies("LLAMA-5 SERVE-1")
    def test_the_check_of_a_running_server_passes_with_pfx_and_fails_on_stock(self):
        # The one check of every server (pfx.verify_server), which recognises llama-server and makes its cold
        # runs with cache_prompt: false.
        module = check_module(self)
        for arguments, status in ((["--pfx"], 0), ([], 1)):
            with self.subTest(arguments=arguments), Server(["--parallel", "1"] + FLASH_ATTENTION + arguments) as server:
                run = subprocess.run([sys.executable, "-m", module, "--url", f"http://127.0.0.1:{server.port}",
                                      "--chat", "2", "--turns", "3", "--json"], capture_output=True, text=True,
                                     timeout=600)
                self.assertEqual(run.returncode, status, run.stdout[-2000:] + run.stderr[-2000:])
                report = json.loads(run.stdout)
                self.assertEqual((report["ok"], report["type"]), (not status, "verify_server"))
                self.assertTrue(report["target"].startswith("llama-server "), report["target"])
                self.assertIn("cache_prompt: false", report["cold"])
                self.assertGreater(report["resumed"], 0)
                mismatches = [row["mismatch"] for row in report["responses"] if row["mismatch"]]
                print(f"{' '.join(arguments) or 'stock'}: {len(mismatches)} of {report['compared']} responses differ "
                      f"from their cold runs")
                if status:  # stock's resumed answers differ from cold in a logprob, their tokens often the same
                    self.assertTrue(any(m.startswith("logprob of generated token") for m in mismatches), mismatches)
        run = subprocess.run([sys.executable, "-m", module, "--url", f"http://127.0.0.1:{free_port()}"],
                             capture_output=True, text=True, timeout=600)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("cannot reach a server at", run.stderr)

    @verifies("LLAMA-5")
    def test_what_the_rule_cannot_vouch_for_stops_the_server_naming_it(self):
        cases = [
            (["--pfx", "--cache-reuse", "256"], "--cache-reuse 256"),
            (["--pfx", "--pfx-alone", "--pfx-chunk", "48"], "--pfx-chunk 48 is not a multiple of the grid 32"),
            (["--pfx-chunk", "32"], "--pfx-chunk is a setting of pfx's rule, which is off: add --pfx"),
            (["--pfx", "--pfx-keep-min", "x"], "--pfx-keep-min: expected an integer >= 0, got 'x'"),
        ]
        for arguments, words in cases:
            with self.subTest(arguments=arguments):
                run = subprocess.run([BINARY, "--model", MODEL, "--host", "127.0.0.1", "--port", str(free_port())]
                                     + SETTINGS + arguments, capture_output=True, text=True, timeout=STARTUP_SECONDS)
                self.assertNotEqual(run.returncode, 0, run.stderr[-2000:])
                self.assertIn(words, run.stderr + run.stdout)
        # A chunk on the grid and a keep_min are taken as given, with no prefill step; with every row computed
        # alone, any chunk.
        with Server(["--pfx", "--pfx-alone", "--pfx-chunk", "64", "--pfx-keep-min", "16", "--parallel", "1"]) as server:
            log = server.output()
        self.assertIn("pfx: the rule is on: chunk 64, prefill step 0, keep_min 16 (--pfx-alone: flash attention off, "
                      "n_batch 512, n_ubatch 32)", log)
        with Server(["--pfx", "--pfx-chunk", "48", "--parallel", "1"]) as server:
            log = server.output()
        self.assertIn("pfx: the rule is on: chunk 48, prefill step 0, keep_min 0 (batch-invariant CPU paths", log)
        # --help lists pfx's options before llama.cpp's own.
        run = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=STARTUP_SECONDS)
        self.assertIn("--pfx-keep-min N", run.stdout)


if __name__ == "__main__":
    unittest.main()
