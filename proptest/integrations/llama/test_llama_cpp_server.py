"""python -m pfx.integrations.llama_cpp.server: llama-cpp-python's OpenAI-compatible server with pfx's
rule on, driven by the official openai client, on the model pfx.fixtures.tiny_gguf writes
(PFX_LLAMA_MODEL). A multi-turn chat: each turn served resumed, then again cold (after a request that
shares nothing with it, which leaves pfx nothing to reuse), the two answers equal, tokens and
logprobs; the reuse counted in the server's log. Stock `python -m llama_cpp.server` serves the same
chat with resumed answers that differ (so the comparison can fail).

Every server binds only 127.0.0.1, on a free port, is waited for at most a minute and stopped at the
end of its test. Skipped, with the reason, where llama-cpp-python, its server's dependencies or the
openai client are not installed (pip install '.[llama-cpp-python-server]').
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
import time
import unittest
import urllib.request

from support import verifies, why_not_llama

MODEL = os.environ.get("PFX_LLAMA_MODEL", "")
STARTUP_SECONDS = 60


WHY_NOT = why_not_llama("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings", "openai",
                        install="the server's dependencies and the openai client come with pip install "
                                "'.[llama-cpp-python-server]' (scripts/install-deps.sh)")
if not WHY_NOT:
    import openai

SETTINGS = ["--n_ctx", "1024", "--n_ubatch", "32", "--n_threads", "1", "--n_threads_batch", "1",
            "--logits_all", "True", "--verbose", "False"]
DECISION = re.compile(r"^pfx: prompt of (\d+) tokens: the context held (\d+) of it, the rule allows (\d+) ", re.M)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A server process on 127.0.0.1: `module` run with `arguments`, its output in a file."""

    def __init__(self, module: str, arguments: list, port: int = 0) -> None:
        self.port = port or free_port()
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        command = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(self.port)] + arguments
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="none", timeout=60,
                                    max_retries=0)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with status {self.process.returncode}:\n{self.output()[-3000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5):
                    return
            time.sleep(0.2)
        raise AssertionError(f"the server did not answer within {STARTUP_SECONDS} s:\n{self.output()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __enter__(self):
        try:
            self.wait_until_serving()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exception) -> None:
        self.stop()


def answer(choice) -> tuple:
    """A chat answer as compared: its text and each token's logprob and top logprobs."""
    logprobs = [(t.token, t.logprob, [(top.token, top.logprob) for top in t.top_logprobs])
                for t in (choice.logprobs.content or [])] if choice.logprobs else None
    return choice.message.content, choice.finish_reason, logprobs


SUBJECTS = ("a cat and a dog", "the sea")  # fixed chats: the same on every run, so each outcome is reproducible


def chat(server: Server, subject: str, turns: int = 4) -> list:
    """A multi-turn chat: each turn resumed (after the previous one), then cold (after a request that
    shares only the begin token with it); [(resumed answer, cold answer)] per turn."""
    messages = [{"role": "system", "content": "you answer briefly"},
                {"role": "user", "content": f"tell me about {subject} " * 3}]
    arguments = dict(model="tiny", max_tokens=16, temperature=0, logprobs=True, top_logprobs=1)
    pairs = []
    for turn in range(turns):
        resumed = server.client.chat.completions.create(messages=messages, **arguments).choices[0]
        server.client.completions.create(model="tiny", prompt="x", max_tokens=1)
        cold = server.client.chat.completions.create(messages=messages, **arguments).choices[0]
        pairs.append((answer(resumed), answer(cold)))
        messages += [{"role": "assistant", "content": cold.message.content},
                     {"role": "user", "content": "and then? " * (turn + 2)}]
    return pairs


@unittest.skipIf(WHY_NOT, WHY_NOT)
class LlamaCppServer(unittest.TestCase):
    @verifies("LLAMA-4 LLAMA-1")
    def test_a_multi_turn_chat_through_the_openai_client_resumes_exactly_and_counts_its_reuse(self):
        # keep_min 2: the request between a turn and its cold run shares the begin token with it, whose row
        # chunk 1 would otherwise reuse; the cold run must start from row 0.
        with Server("pfx.integrations.llama_cpp.server",
                    ["--model", MODEL, "--model_alias", "tiny", "--pfx-keep-min", "2"] + SETTINGS) as server:
            chats = [chat(server, subject) for subject in SUBJECTS]
            # Streamed, the answer is the same too.
            messages = [{"role": "user", "content": "stream a story " * 8}]
            parts = server.client.chat.completions.create(model="tiny", messages=messages, max_tokens=12,
                                                          temperature=0, stream=True)
            streamed = "".join(part.choices[0].delta.content or "" for part in parts if part.choices)
            again = server.client.chat.completions.create(model="tiny", messages=messages, max_tokens=12, temperature=0)
            log = server.output()
        for subject, pairs in zip(SUBJECTS, chats):
            for turn, (resumed, cold) in enumerate(pairs):
                self.assertEqual(resumed, cold, f"{subject}, turn {turn}")
        self.assertEqual(streamed, again.choices[0].message.content)
        self.assertIn("under pfx's rule: LlamaRule(chunk=1, keep_min=2, prefill_step=32, grid=32 (n_batch 512, "
                      "n_ubatch 32)", log)
        # Three requests a turn (resumed, the one that shares nothing, cold), then the two streamed ones.
        decisions = [(int(p), int(h), int(r)) for p, h, r in DECISION.findall(log)]
        turns = sum(len(pairs) for pairs in chats)
        self.assertEqual(len(decisions), 3 * turns + 2, log)
        first_turns = {3 * sum(len(pairs) for pairs in chats[:i]) for i in range(len(chats))}
        resumed = [decisions[3 * t] for t in range(turns) if 3 * t not in first_turns]
        cold = [decisions[3 * t + 2] for t in range(turns)]
        for prompt, held, reused in resumed:
            self.assertGreater(reused, 0, log)
            # Flash attention off: chunk 1 and the prefill step 32 (INV-12): the resumed prefill's last
            # ubatch is one row exactly when the cold run's is.
            self.assertEqual((prompt - reused - 1) % 32 == 0, (prompt - 1) % 32 == 0)
            self.assertLessEqual(reused, min(held, prompt - 1))
        self.assertEqual([reused for _, _, reused in cold], [0] * len(cold))
        print(f"pfx's server: {sum(r for _, _, r in resumed)} of {sum(p for p, _, _ in resumed)} prompt tokens of "
              f"{len(resumed)} resumed turns reused; the context held {sum(h for _, h, _ in resumed)} of them")

    @verifies("LLAMA-4 CEX-1 SERVE-1")
    def test_the_stock_server_serves_resumed_turns_that_differ_from_their_cold_runs(self):
        with Server("llama_cpp.server", ["--model", MODEL, "--model_alias", "tiny"] + SETTINGS) as server:
            chats = [chat(server, subject) for subject in SUBJECTS]
            # The one server check knows this server, and that its API gives no cold run and no reuse count.
            check = subprocess.run([sys.executable, "-m", "pfx.verify_server", "--url",
                                    f"http://127.0.0.1:{server.port}"], capture_output=True, text=True, timeout=120)
        self.assertEqual((check.returncode, check.stdout), (2, ""), check.stderr)
        self.assertIn("is llama-cpp-python's own server, whose API neither makes a cold run nor says how many prompt "
                      "tokens it reused", check.stderr)
        self.assertIn("serve the model with python -m pfx.integrations.llama_cpp.server", check.stderr)
        differing = sum(resumed != cold for pairs in chats for resumed, cold in pairs[1:])
        print(f"stock server: {differing} of {sum(len(pairs) - 1 for pairs in chats)} resumed turns differ from their "
              "cold runs")
        self.assertGreater(differing, 0)

    @verifies("LLAMA-4 SERVE-1")
    def test_the_check_of_a_running_server_passes_on_pfxs_server(self):
        # pfx's server adds what the one server check needs (pfx.integrations.llama_cpp.server_api): the
        # reused-token count in usage and cache_prompt: false for a cold run. The check plays chats through
        # it, each turn resumed, then cold, compared token for token and logprob for logprob.
        with Server("pfx.integrations.llama_cpp.server", ["--model", MODEL, "--model_alias", "tiny"] + SETTINGS) as server:
            url = f"http://127.0.0.1:{server.port}"
            check = subprocess.run([sys.executable, "-m", "pfx.verify_server", "--url", url, "--chat", "2", "--turns",
                                    "3", "--json"], capture_output=True, text=True, timeout=300)
            # Streamed answers pass through as they come; a token-id trace is refused, naming the request.
            parts = server.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                          max_tokens=4, temperature=0, stream=True)
            streamed = [part for part in parts]
            with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as trace:
                trace.write('{"prompt": [1, 2, 3], "max_new_tokens": 2}\n')
                trace.flush()
                ids = subprocess.run([sys.executable, "-m", "pfx.verify_server", "--url", url, trace.name],
                                     capture_output=True, text=True, timeout=120)
            log = server.output()
        self.assertEqual(check.returncode, 0, check.stdout[-3000:] + check.stderr + log[-2000:])
        report = json.loads(check.stdout)
        self.assertEqual((report["ok"], report["compared"], report["mismatches"]), (True, 6, 0))
        self.assertGreater(report["resumed"], 0)
        self.assertTrue(all(row["cold_cached_tokens"] == 0 for row in report["responses"]))
        self.assertIn("llama-cpp-python's server with pfx's rule", report["target"])
        # Each response's count is the rule's decision for it, as the server logged it.
        served = [int(r) for _, _, r in DECISION.findall(log)][0:12:2]
        self.assertEqual([row["cached_tokens"] for row in report["responses"]], served)
        self.assertGreater(len(streamed), 1)
        self.assertEqual(ids.returncode, 2, ids.stderr)
        self.assertIn("takes text prompts only, not the token ids of request 1 (line 1)", ids.stderr)

    @verifies("LLAMA-4")
    def test_the_settings_file_is_the_servers_own_and_every_model_it_loads_is_under_the_rule(self):
        port = free_port()  # with a settings file, the server takes its address from the file
        with tempfile.NamedTemporaryFile("w", suffix=".json") as settings:
            model = {"model": MODEL, "n_ctx": 512, "n_threads": 1, "n_threads_batch": 1, "verbose": False}
            json.dump({"host": "127.0.0.1", "port": port,
                       "models": [dict(model, model_alias="first", n_ubatch=32),
                                  dict(model, model_alias="second", n_ubatch=32, n_batch=48)]}, settings)
            settings.flush()
            with Server("pfx.integrations.llama_cpp.server", ["--config_file", settings.name, "--pfx-keep-min", "16"],
                        port=port) as server:
                for alias in ("first", "second"):
                    server.client.completions.create(model=alias, prompt="hello " * 20, max_tokens=4, temperature=0)
                log = server.output()
        self.assertIn("under pfx's rule: LlamaRule(chunk=1, keep_min=16, prefill_step=32, grid=32 (n_batch 512, "
                      "n_ubatch 32)", log)
        self.assertIn("under pfx's rule: LlamaRule(chunk=48, keep_min=16, prefill_step=0, grid=48 (n_batch 48, "
                      "n_ubatch 32)", log)

    @verifies("LLAMA-4 LLAMA-3")
    def test_what_the_rule_cannot_take_stops_the_server_naming_it(self):
        module = "pfx.integrations.llama_cpp.server"
        cases = [
            (["--pfx-chunk", "0"], 2, "--pfx-chunk: expected an integer >= 1, got 0"),
            (["--pfx-chunk", "48"] + SETTINGS, 1, "chunk 48 is not a multiple of the grid 32"),
            (["--pfx-keep-min", "-1"], 2, "--pfx-keep-min: expected an integer >= 0, got -1"),
        ]
        for arguments, status, words in cases:
            with self.subTest(arguments=arguments):
                run = subprocess.run([sys.executable, "-m", module, "--model", MODEL, "--host", "127.0.0.1", "--port",
                                      str(free_port())] + arguments, capture_output=True, text=True, timeout=STARTUP_SECONDS)
                self.assertEqual(run.returncode, status, run.stderr[-2000:])
                self.assertIn(words, run.stderr)
        code = ("import llama_cpp, sys; llama_cpp.__version__ = '0.3.37'; "
                "from pfx.integrations.llama_cpp.server import main; sys.exit(main(sys.argv[1:]))")
        run = subprocess.run([sys.executable, "-c", code, "--model", MODEL], capture_output=True, text=True,
                             timeout=STARTUP_SECONDS)
        self.assertEqual(run.returncode, 2, run.stderr[-2000:])
        self.assertIn("tested with llama-cpp-python 0.3.36, and this is 0.3.37", run.stderr)
