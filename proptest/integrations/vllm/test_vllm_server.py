"""vLLM's OpenAI-compatible server as a user runs it, with pfx's plugin on and off, and
pfx.verify_server, the check of a server a user runs (and of a vllm.LLM in this process).

Three real `python -m vllm.entrypoints.openai.api_server` processes, on 127.0.0.1 and free ports,
serve the tiny Llama with its tokenizer and chat template (pfx.fixtures.tiny_tokenizer), their workers
computing with two threads (VLLM_CPU_OMP_THREADS_BIND=0-1, this suite's ctest), started together and
stopped when the suite ends, failed or not (and when this process dies: they get SIGTERM then):

- pfx: PFX_VLLM=1 (vLLM loads the plugin through its entry point in the server's processes), prefix
  caching, the reused-token counts (--enable-prompt-tokens-details) and the development endpoints
  (VLLM_SERVER_DEV_MODE=1: POST /reset_prefix_cache);
- stock: the same without PFX_VLLM;
- plain: without prefix caching, counts or development endpoints, with PFX_VLLM=1 so that it computes
  as the pfx server does (the plugin's batch invariance; it has no cache to decide on): the cold side
  of --cold-url, and a server the check refuses.

A multi-turn chat through chat completions with the official openai client, as a chat client sends
it, each turn served, then cold after a reset: with the plugin every answer equals its cold run,
token for token and logprob for logprob, keeping at least half of stock's reuse; stock's differ
somewhere, so the test can fail. The check, run on the same servers, passes with the plugin and fails
on stock with pfx's verdict words and exit statuses, refuses a server it cannot use by name, and never
passes a run that compared nothing resumed. Requests go to 127.0.0.1 only."""
from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from unittest import mock

from support import SEED, verifies

import vllm_lane

WHY_NOT = vllm_lane.WHY_NOT
if not WHY_NOT:
    try:
        import jsonschema
        import openai
    except ImportError as error:
        WHY_NOT = f"{error.name} cannot be imported in vLLM's environment (vLLM depends on openai): scripts/vllm.sh"
if not WHY_NOT:
    import pfx.integrations.vllm as plugin
    from pfx.fixtures.tiny_llama import VOCAB
    from pfx.fixtures.tiny_tokenizer import write_tiny_tokenizer
    from pfx.fixtures.workloads import text_conversations
    import pfx.integrations.vllm._check as vllm_check
    import pfx.verify_server as verify_server
    from pfx.verify_server import command as verify_command

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "schemas",
                      "verify_server.schema.json")
HOST = "127.0.0.1"
START_TIMEOUT_S = 420  # three servers start together on two busy cores
# The chats: 32 new tokens (the check's default), so that the rows decode wrote fill a block in most
# turns and stock vLLM reuses them; 10 turns of which 8 resume, of which stock differs in about half.
CONVERSATIONS, TURNS, NEW_TOKENS = 2, 5, 32
CONCURRENT = 4  # conversations in flight at once, under load
STOCK_DRAWS = 4  # at most, for a stock control under load (until_stock_differs)
ENGINE = {"dtype": vllm_lane.DTYPE, "block_size": vllm_lane.BLOCK, "max_num_batched_tokens": vllm_lane.MAX_NUM_BATCHED_TOKENS,
          "max_model_len": 4096, "kv_cache_memory_bytes": 256 << 20, "seed": 0, "enforce_eager": True}
SERVER_ARGUMENTS = [f"--{key.replace('_', '-')}={value}" for key, value in ENGINE.items() if key != "enforce_eager"]
SERVER_ARGUMENTS.append("--enforce-eager")
COUNTED = ["--enable-prefix-caching", "--enable-prompt-tokens-details"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process before it runs: SIGTERM when this process dies (PR_SET_PDEATHSIG), so a
    suite killed by its timeout leaves no server behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class ServerProcess:
    """One `python -m vllm.entrypoints.openai.api_server` of this suite, in a process group of its own."""

    def __init__(self, name: str, model: str, arguments: list, environment: dict):
        self.name, self.port = name, free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix=f"pfx-vllm-{name}-", suffix=".log", delete=False)
        env = {key: value for key, value in os.environ.items() if not key.startswith("PFX_VLLM")
               and key not in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_SERVER_DEV_MODE")}
        env.update(environment, HF_HUB_OFFLINE="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", HOST,
             "--port", str(self.port), *SERVER_ARGUMENTS, *arguments],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.name} server exited with status {self.process.returncode}:\n"
                                   f"{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5):
                    return
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"the {self.name} server did not serve within {START_TIMEOUT_S} s:\n{self.tail()}")

    def tail(self) -> str:
        with open(self.log.name, errors="replace") as log:
            return "".join(log.readlines()[-30:])

    def stop(self) -> None:
        """SIGTERM to its process group (the API server and its engine core), then SIGKILL after 30 s."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        os.unlink(self.log.name)


def reset(url: str) -> None:
    request = urllib.request.Request(f"{url}/reset_prefix_cache", method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        if not json.loads(answer.read())["success"]:
            raise RuntimeError(f"{url} did not reset its prefix cache")


def until_stock_differs(run, differs, draws: int = STOCK_DRAWS):
    """run(draw) for draws 0, 1, ... until differs(its result), at most `draws` times: the last result.
    The controls under load, on stock vLLM: in bfloat16 on a CPU with AVX512-BF16, 4 to 7 of 20 answers
    served 4 at a time differ from alone, so that a draw with none is rare but not negligible, and a
    control quiet by the draw would fail a run it should not."""
    result = run(0)
    for draw in range(1, draws):
        if differs(result):
            break
        result = run(draw)
    return result


def run_check(*arguments) -> tuple:
    """The check's command, in this process: (exit status, standard output, standard error)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = verify_server.main([str(argument) for argument in arguments])
    return status, out.getvalue(), err.getvalue()


def run_check_json(*arguments) -> tuple:
    """The check's command with --json, and the text of the same run (the Report it printed as JSON,
    as the command prints it without --json): (exit status, the JSON, validated, the text, stderr)."""
    reports = []

    def kept(*args, **kwargs):
        reports.append(real_check(*args, **kwargs))
        return reports[-1]

    real_check = verify_command.check
    with mock.patch.object(verify_command, "check", side_effect=kept):
        status, text, err = run_check(*arguments, "--json")
    if not reports:
        raise AssertionError(f"the check reported nothing (exit status {status}): {err}")
    return status, validated(text), str(reports[0]), err


def validated(text: str) -> dict:
    with open(SCHEMA) as file:
        jsonschema.validate(json.loads(text), json.load(file))
    return json.loads(text)


class WarmColdRun(unittest.TestCase):
    """A check whose cold runs are not cold gives no verdict: stand-ins for the checked server and for a
    --cold-url server that (with prefix caching on) took cached tokens; no vLLM is started."""

    class Side:
        counter = "cached_tokens"
        concurrent = True

        def __init__(self, cached):
            self.cached = cached

        def serve(self, request):
            return verify_server.Served((1,) * request.max_tokens, (-0.5,) * request.max_tokens, self.cached, 10,
                                        None, "text")

        def cold(self, request):
            return self.serve(request)

        def describe(self):
            return "a stand-in"

        def cold_words(self):
            return "a stand-in's"

        def no_counts(self):
            return "no counts"

        def no_reuse(self):
            return "none"

    @verifies("VLLM-4")
    def test_a_cold_run_that_took_cached_tokens_is_no_verdict_never_a_pass(self):
        for cold_cached, expected in ((0, 0), (16, 3)):  # a cold server that took none: a pass; 16: no verdict
            stderr, stdout = io.StringIO(), io.StringIO()
            with self.subTest(cold_cached=cold_cached), \
                    mock.patch.object(verify_command, "_targets", return_value=(self.Side(8), self.Side(cold_cached))), \
                    contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
                status = verify_server.main(["--url", "http://127.0.0.1:9", "--cold-url", "http://127.0.0.1:9",
                                           "--chat", "1", "--no-progress"])
            self.assertEqual(status, expected, stderr.getvalue() + stdout.getvalue())
            if expected:
                self.assertIn("the cold run of request 1 took 16 prompt tokens from the cache: it was not cold", stderr.getvalue())


@unittest.skipIf(WHY_NOT, WHY_NOT)
class ServedByVllm(unittest.TestCase):
    servers: dict = {}

    @classmethod
    def setUpClass(cls):
        vllm_lane.expect_mode(plugin_on=False, in_process=True)
        os.environ["NO_PROXY"] = os.environ["no_proxy"] = HOST  # the suite's requests stay on this machine
        cls.model = vllm_lane.tiny_model()
        write_tiny_tokenizer(cls.model)
        dev = {"VLLM_SERVER_DEV_MODE": "1"}
        for name, arguments, environment in (("pfx", COUNTED, {"PFX_VLLM": "1", **dev}),
                                             ("stock", COUNTED, dev),
                                             # The cold side computes as the pfx server does: the plugin
                                             # sets its kernels, and has no cache to decide on.
                                             ("plain", ["--no-enable-prefix-caching"], {"PFX_VLLM": "1"})):
            cls.servers[name] = ServerProcess(name, cls.model, arguments, environment)
            cls.addClassCleanup(cls.servers[name].stop)
        deadline = time.monotonic() + START_TIMEOUT_S
        for server in cls.servers.values():
            server.wait_ready(deadline)

    def url(self, name: str) -> str:
        return self.servers[name].url

    def client(self, name: str):
        return openai.OpenAI(base_url=f"{self.url(name)}/v1", api_key="unused", max_retries=0, timeout=300)

    @staticmethod
    def ask(client, messages) -> tuple:
        """One greedy chat completion: (token ids, their logprobs, tokens reused from the cache, text)."""
        model = client.models.list().data[0].id
        answer = client.chat.completions.create(
            model=model, messages=messages, max_completion_tokens=NEW_TOKENS, temperature=0.0, logprobs=True,
            top_logprobs=0, extra_body={"ignore_eos": True, "return_token_ids": True})
        choice = answer.choices[0]
        return (tuple(choice.token_ids), tuple(entry.logprob for entry in choice.logprobs.content),
                answer.usage.prompt_tokens_details.cached_tokens, choice.message.content)

    def compare_with_cold(self, name: str, client, outcome: dict, where, messages, served: tuple) -> None:
        """`messages` served again, cold, after POST /reset_prefix_cache, and compared with `served`
        (ask()'s answer), tokens and logprobs: counted in `outcome`, a difference listed under `where`."""
        tokens, logprobs, cached, _ = served
        reset(self.url(name))
        cold_tokens, cold_logprobs, cold_cached, _ = self.ask(client, messages)
        self.assertEqual(cold_cached, 0, f"{name}: the cold run took tokens from the cache")
        self.assertEqual(len(tokens), NEW_TOKENS)
        outcome["turns"] += 1
        outcome["reused"] += cached
        outcome["resumed"] += cached > 0
        if (tokens, logprobs) != (cold_tokens, cold_logprobs):
            outcome["differing"].append((*where, cached))

    def chat_through_openai(self, name: str, seed) -> dict:
        """The chat of `seed` through chat completions with the openai client, conversation after
        conversation, each turn holding the answers before it: each turn served, then cold after
        POST /reset_prefix_cache. Returns the reused tokens and the turns that differ from cold."""
        client = self.client(name)
        outcome = {"reused": 0, "resumed": 0, "turns": 0, "differing": []}
        reset(self.url(name))
        for number, conversation in enumerate(text_conversations(random.Random(seed), CONVERSATIONS, TURNS)):
            messages = [{"role": "system", "content": conversation.system}]
            for turn, message in enumerate(conversation.messages):
                messages.append({"role": "user", "content": message})
                served = self.ask(client, messages)
                self.compare_with_cold(name, client, outcome, (number, turn), list(messages), served)
                messages.append({"role": "assistant", "content": served[3]})
        return outcome

    def chats_at_once_through_openai(self, name: str, seed) -> dict:
        """CONCURRENT conversations of the chat of `seed` through chat completions, each in a thread of its
        own with its own openai client, all at once, each turn after the answer to the one before: the
        server batches whatever is in flight. Then each turn is served alone, cold, after POST
        /reset_prefix_cache, and compared. Returns the reused tokens and the turns that differ."""
        conversations = text_conversations(random.Random(seed), CONCURRENT, TURNS)
        reset(self.url(name))

        def converse(conversation):
            client = self.client(name)
            messages = [{"role": "system", "content": conversation.system}]
            turns = []
            for message in conversation.messages:
                messages.append({"role": "user", "content": message})
                served = self.ask(client, messages)
                turns.append((list(messages), served))
                messages.append({"role": "assistant", "content": served[3]})
            return turns

        with concurrent.futures.ThreadPoolExecutor(CONCURRENT) as pool:
            served = [turn for turns in pool.map(converse, conversations) for turn in turns]
        outcome = {"reused": 0, "resumed": 0, "turns": 0, "differing": []}
        client = self.client(name)
        for number, (messages, answer) in enumerate(served):
            self.compare_with_cold(name, client, outcome, (number,), messages, answer)
        return outcome

    @verifies("SERVE-2 VLLM-1 VLLM-3")
    def test_a_chat_through_the_openai_client_resumes_exactly_with_the_plugin_and_differs_on_stock(self):
        seed = f"{SEED}:openai"
        with_plugin = self.chat_through_openai("pfx", seed)
        stock = self.chat_through_openai("stock", seed)
        print(f"seed {seed}: with the plugin {len(with_plugin['differing'])} of {with_plugin['resumed']} resumed "
              f"answers differ, {with_plugin['reused']} tokens reused; stock {len(stock['differing'])} of "
              f"{stock['resumed']}, {stock['reused']} tokens reused")
        self.assertEqual(with_plugin["differing"], [], f"seed {seed}: {with_plugin}")
        self.assertGreater(with_plugin["resumed"], 0, f"seed {seed}: no answer resumed from the cache")
        self.assertGreaterEqual(2 * with_plugin["reused"], stock["reused"], f"seed {seed}: {with_plugin} vs {stock}")
        vllm_lane.skip_if_stock_alone_is_exact_in_bfloat16(self, len(stock["differing"]), stock["resumed"])
        self.assertNotEqual(stock["differing"], [], f"seed {seed}: stock vLLM answered every turn as its cold run: "
                                                    f"the first assertion could not fail on this chat")

    @verifies("SERVE-2 VLLM-1 VLLM-9")
    def test_concurrent_openai_clients_each_get_their_cold_run_served_alone_with_the_plugin_and_not_on_stock(self):
        seed = f"{SEED}:concurrent"
        with_plugin = self.chats_at_once_through_openai("pfx", seed)
        stock = until_stock_differs(lambda draw: self.chats_at_once_through_openai("stock", f"{seed}:{draw}" if draw else seed),
                                    lambda outcome: outcome["differing"])
        print(f"seed {seed}, {CONCURRENT} clients at once: with the plugin {len(with_plugin['differing'])} of "
              f"{with_plugin['turns']} answers differ from their cold run alone ({with_plugin['resumed']} resumed, "
              f"{with_plugin['reused']} tokens reused); stock {len(stock['differing'])} of {stock['turns']} "
              f"({stock['resumed']} resumed, {stock['reused']} tokens reused)")
        self.assertEqual(with_plugin["differing"], [], f"seed {seed}: {with_plugin}")
        self.assertGreater(with_plugin["resumed"], 0, f"seed {seed}: no answer resumed from the cache")
        self.assertNotEqual(stock["differing"], [], f"seed {seed}: stock vLLM answered every turn as its cold run "
                                                    f"alone: the first assertion could not fail under this load")

    @verifies("SERVE-1 VLLM-9")
    def test_the_check_with_requests_in_flight_passes_with_the_plugin_and_fails_on_stock(self):
        chat = ["--chat", CONCURRENT, "--turns", TURNS, "--seed", SEED % 1000, "--concurrency", CONCURRENT]
        status, report, text, err = run_check_json("--url", self.url("pfx"), *chat)
        self.assertEqual((status, report["ok"], report["mismatches"], report["concurrency"]), (0, True, 0, CONCURRENT),
                         text + err)
        self.assertEqual(report["requests"], CONCURRENT * TURNS)
        self.assertGreater(report["resumed"], 0)
        self.assertIn(f"{CONCURRENT} requests in flight", text)
        status, stock, text, err = until_stock_differs(
            lambda draw: run_check_json("--url", self.url("stock"), *chat[:-3], (SEED + draw) % 1000, *chat[-2:]),
            lambda run: run[1]["mismatches"])
        print(f"the check with {CONCURRENT} requests in flight on stock vLLM: {stock['mismatches']} of "
              f"{stock['requests']} responses differ")
        self.assertEqual((status, stock["ok"]), (1, False), text + err)
        self.assertGreater(stock["mismatches"], 0)
        # Bad input is refused before anything is served: no count, a trace with clears, no server.
        self.assertEqual(run_check("--url", self.url("pfx"), "--concurrency", 0)[0], 2)
        status, _, err = run_check("--model", self.model, "--concurrency", 2)
        self.assertEqual(status, 2)
        self.assertIn("--concurrency above 1 needs a server (--url)", err)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as trace:
            trace.write('{"prompt": [1, 2, 3]}\n{"op": "clear"}\n{"prompt": [1, 2, 3]}\n')
            trace.flush()
            status, _, err = run_check("--url", self.url("pfx"), trace.name, "--concurrency", 2)
        self.assertEqual(status, 2)
        self.assertIn("cannot be replayed with requests in flight", err)

    @verifies("SERVE-1")
    def test_the_check_passes_with_the_plugin_and_fails_on_stock_with_pfx_verdicts(self):
        chat = ["--chat", CONVERSATIONS, "--turns", TURNS, "--seed", SEED % 1000]
        status, report, text, err = run_check_json("--url", self.url("pfx"), *chat)
        self.assertEqual((status, report["ok"], report["exit_status"], report["mismatches"]), (0, True, 0, 0),
                         text + err)
        self.assertIn("cold runs: the same server after POST /reset_prefix_cache", text)
        self.assertTrue(text.endswith(f"{verify_server.PROGRAM}: every check passed\n"), text)
        self.assertEqual(report["requests"], CONVERSATIONS * TURNS)
        self.assertGreater(report["resumed"], 0)
        self.assertIsNotNone(report["ttft_ms"])
        self.assertEqual({row["generated_tokens"] for row in report["responses"]}, {NEW_TOKENS})
        self.assertTrue(all(row["cold_cached_tokens"] == 0 for row in report["responses"]))

        status, stock, text, err = run_check_json("--url", self.url("stock"), *chat)
        print(f"the check on stock vLLM: {stock['mismatches']} of {stock['resumed']} resumed responses differ, "
              f"{stock['reused_tokens']} tokens reused; with the plugin {report['reused_tokens']}")
        self.assertGreaterEqual(2 * report["reused_tokens"], stock["reused_tokens"])
        vllm_lane.skip_if_stock_alone_is_exact_in_bfloat16(self, stock["mismatches"], stock["resumed"])
        self.assertEqual((status, stock["ok"], stock["exit_status"]), (1, False, 1), text + err)
        self.assertGreater(stock["mismatches"], 0)
        self.assertIn("\nMISMATCH: ", text)
        self.assertIn("(exit status 1)", text)
        self.assertNotIn("every check passed", text)
        first = stock["first_mismatch"]
        self.assertIn(f"MISMATCH: {first['text']} (exit status 1)", text)
        row = stock["responses"][first["request"] - 1]
        self.assertEqual((row["bitexact"], row["mismatch"]), (False, first["what"]))
        self.assertRegex(first["what"], r"^(generated token \d+: \d+ vs \d+ cold|logprob of generated token \d+: "
                                        r"\S+ \(0x[0-9a-f]{16}\) vs \S+ \(0x[0-9a-f]{16}\) cold)$")
        self.assertGreaterEqual(2 * report["reused_tokens"], stock["reused_tokens"])

    @verifies("SERVE-1")
    def test_cold_runs_may_come_from_a_second_server_without_prefix_caching(self):
        status, report, text, err = run_check_json("--url", self.url("pfx"), "--cold-url", self.url("plain"),
                                                   "--chat", 1, "--turns", 3, "--seed", SEED % 1000 + 1,
                                                   "--max-new-tokens", 8)
        self.assertEqual((status, report["ok"]), (0, True), text + err)
        self.assertIn(self.url("plain"), report["cold"])
        self.assertTrue(all(row["cold_cached_tokens"] is None for row in report["responses"]))  # plain does not count

    @verifies("SERVE-1")
    def test_a_trace_of_token_ids_goes_through_completions_and_a_clear_resets_the_cache(self):
        r = random.Random(f"{SEED}:trace")
        first = [r.randrange(VOCAB) for _ in range(r.randrange(70, 130))]
        second = first + [r.randrange(VOCAB) for _ in range(r.randrange(10, 60))]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as trace:
            for line in ({"prompt": first, "max_new_tokens": 6},
                         {"prompt": second, "max_new_tokens": 6, "label": "turn"},
                         {"op": "clear"}, {"prompt": second, "label": "after a clear"}):
                trace.write(json.dumps(line) + "\n")
        self.addCleanup(os.unlink, trace.name)
        status, report, text, err = run_check_json("--url", self.url("pfx"), trace.name, "--max-new-tokens", 4)
        self.assertEqual((status, report["ok"]), (0, True), text + err)
        self.assertEqual([row["line"] for row in report["responses"]], [1, 2, 4])
        self.assertEqual([row["generated_tokens"] for row in report["responses"]], [6, 6, 4])
        # The turn resumes from the first prompt's blocks; after the clear nothing is cached.
        self.assertGreater(report["responses"][1]["cached_tokens"], 0)
        self.assertEqual(report["responses"][2]["cached_tokens"], 0)

    @verifies("SERVE-1")
    def test_a_run_that_compared_nothing_resumed_does_not_pass(self):
        r = random.Random(f"{SEED}:unrelated")
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as trace:
            for first_token in (1, 2):  # prompts that share no block: nothing resumes
                prompt = [first_token] + [r.randrange(VOCAB) for _ in range(40)]
                trace.write(json.dumps({"prompt": prompt, "max_new_tokens": 4}) + "\n")
        self.addCleanup(os.unlink, trace.name)
        status, report, text, err = run_check_json("--url", self.url("pfx"), trace.name)
        self.assertEqual(status, 1, text + err)
        self.assertIn("FAILED: no request resumed from the server's cache", text)
        self.assertNotIn("every check passed", text)
        self.assertEqual((report["ok"], report["resumed"], report["mismatches"]), (False, 0, 0))
        self.assertIn("unchecked", report)
        # No response at all: a run stopped before its first comparison.
        with mock.patch.object(verify_server.VllmServer, "serve", side_effect=KeyboardInterrupt):
            stopped = verify_server.check(verify_server.connect(self.url("pfx")), verify_server.Chat(1, 1))
        self.assertEqual((stopped.ok, stopped.exit_status, stopped.unchecked),
                         (False, 130, "no response was compared with a cold run"))
        self.assertIn("INTERRUPTED by SIGINT after 0 requests", str(stopped))

    @verifies("SERVE-1")
    def test_a_server_the_check_cannot_use_is_refused_by_name(self):
        cases = [
            (["--url", self.url("plain")], "VLLM_SERVER_DEV_MODE=1"),
            (["--url", self.url("plain"), "--cold-url", self.url("stock")], "--enable-prompt-tokens-details"),
            (["--url", f"http://{HOST}:{free_port()}"], "cannot reach a server at"),
            (["--url", self.url("pfx"), "--model", "another"], "does not serve 'another'"),
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as trace:
            trace.write(json.dumps({"prompt": [1, 2, VOCAB], "max_new_tokens": 2}) + "\n")
        self.addCleanup(os.unlink, trace.name)
        cases.append((["--url", self.url("pfx"), trace.name], "refused request 1 (line 1): HTTP 400"))
        for arguments, named in cases:
            with self.subTest(arguments=arguments):
                status, out, err = run_check(*arguments)
                self.assertEqual((status, out), (2, ""), err)
                self.assertIn(named, err)

    @verifies("SERVE-1")
    def test_bad_input_is_refused_before_a_server_is_asked(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as trace:
            trace.write('{"prompt": [1, 2], "max_new_tokens": 2}\n{"prompt": [1, -2]}\n')
        self.addCleanup(os.unlink, trace.name)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as empty:
            empty.write('{"op": "clear"}\n\n')
        self.addCleanup(os.unlink, empty.name)
        unreachable = f"http://{HOST}:{free_port()}"
        for arguments, named in (
                ([trace.name], f"{trace.name}:2[1]: expected a token id"),
                ([empty.name], f"{empty.name} holds no request: nothing to replay"),
                (["/nonexistent/trace.jsonl"], "cannot read the trace /nonexistent/trace.jsonl"),
                (["--chat", 0], "conversations must be an int >= 1"),
                (["--max-new-tokens", 0], "max_new_tokens must be an int >= 1"),
                ([empty.name, "--turns", 2], "--turns is an option of the generated chat"),
                (["--engine-args", "{}", "--cold-url", unreachable], "--cold-url is the cold side of --url"),
                (["--url", "ftp://x"], "is not a server's URL")):
            with self.subTest(arguments=arguments):
                status, out, err = run_check("--url", unreachable, *arguments) if "--url" not in arguments \
                    and "--cold-url" not in arguments else run_check(*arguments)
                self.assertEqual((status, out), (2, ""), err)
                self.assertIn(named, err)

    @verifies("SERVE-1")
    def test_the_command_runs_as_a_module_and_its_output_error_is_74(self):
        command = [sys.executable, "-m", "pfx.verify_server", "--url", self.url("pfx"), "--chat", 1,
                   "--seed", SEED % 1000 + 2, "--max-new-tokens", 4, "--turns"]
        done = subprocess.run([str(c) for c in command + [3]], capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue(done.stdout.endswith("every check passed\n"), done.stdout)
        with open("/dev/full", "w") as full:  # whatever the verdict (one turn resumes nothing: 1), 74
            done = subprocess.run([str(c) for c in command + [1]], stdout=full, stderr=subprocess.PIPE, text=True,
                                  timeout=300)
        self.assertEqual(done.returncode, 74, done.stderr)
        self.assertIn("cannot write the output", done.stderr)

    @verifies("SERVE-1 VLLM-1")
    def test_the_check_of_a_vllm_llm_in_this_process(self):
        """The in-process form, with the plugin on in this process (enable()): its Python API on token
        ids (generate) and on a chat (chat), and its command line on the same engine (start() is the
        one place the command makes the engine: it is handed this one)."""
        plugin.enable()
        self.addCleanup(plugin.disable)
        llm = vllm_check.start(self.model, **ENGINE)
        self.addCleanup(llm.llm_engine.engine_core.shutdown)
        engine = verify_server.InProcess(llm)
        chat = verify_server.check(engine, verify_server.Chat(2, 3, SEED % 1000, 8))
        self.assertTrue(chat.ok, str(chat))
        self.assertIn("in this process", chat.target)
        self.assertIsNotNone(chat.ttft_ms())  # start() keeps the request stats
        long_turns = vllm_lane.long_turns(random.Random(f"{SEED}:in-process"))
        trace, response = [], ()
        for _ in range(4):
            step = long_turns(response)
            trace.append({"prompt": list(step.prompt), "max_new_tokens": 6, "label": step.kind})
            response = tuple(random.Random(len(trace)).randrange(VOCAB) for _ in range(6))
        ids = verify_server.check(engine, verify_server.Trace(trace))
        self.assertTrue(ids.ok, str(ids))
        self.assertEqual(ids.compared, 4)
        # A clear in the trace empties the engine's cache before the next request: that one takes nothing.
        cleared = verify_server.check(engine, verify_server.Trace(trace[:2] + [{"op": "clear"}] + trace[2:]))
        self.assertTrue(cleared.ok, str(cleared))
        self.assertEqual(cleared.rows[2].served.cached, 0)
        with self.assertRaisesRegex(verify_server.BadInput, r"^vLLM refused request 1 \(line 1\): .*vocab"):
            verify_server.check(engine, verify_server.Trace([{"prompt": [1, VOCAB], "max_new_tokens": 2}]))
        with mock.patch.object(vllm_check, "start", return_value=llm) as started:
            status, report, text, err = run_check_json("--model", self.model, "--engine-args", json.dumps(ENGINE),
                                                       "--chat", 1, "--turns", 3, "--seed", SEED % 1000)
        started.assert_called_once_with(self.model, **ENGINE)
        self.assertEqual((status, report["ok"]), (0, True), text + err)
        self.assertIn("after reset_prefix_cache()", report["cold"])


if __name__ == "__main__":
    unittest.main()
