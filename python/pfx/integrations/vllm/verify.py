"""pfx's check of the vLLM a user serves: does each response equal a cold run of the same request,
bit for bit (docs/engines.md, "Checking a server")?

It replays a workload, one request at a time or ``--concurrency N`` at once, through a running
OpenAI-compatible vLLM server
(``--url``: the server's own streaming API, as its clients call it) or through a ``vllm.LLM`` in this
process (``--model`` without ``--url``; ``check(Engine(llm), ...)`` in code). Each request is served
twice: first as it comes, from whatever vLLM's prefix cache holds, then cold, and the two are
compared bit for bit: every generated token and its logprob (``first_difference``).
With ``--concurrency N`` the workload is served as a loaded server serves it, N requests in flight
(N conversations at a time, each turn after the answer to the one before; a trace's requests N at a
time), and only then is each request served cold, alone, one after the other: a response must equal
its cold run served alone whatever the server batched beside it.
A cold run is served after ``POST /reset_prefix_cache`` on the same server (``vllm.LLM``:
``reset_prefix_cache()``), or by a second server of the same model without prefix caching
(``--cold-url``), which must compute as the first does (with pfx's plugin on the first, start the second
with ``PFX_VLLM=1`` too: the plugin's batch invariance changes vLLM's kernels). The workload is a generated chat (``--chat N``: N conversations of ``--turns``
turns through chat completions, each turn holding the answers before it, as a chat client sends
them) or a JSON Lines trace of token ids as ``pfx replay`` reads one (docs/cli.md, "Trace format"),
sent to completions. Every request generates ``max_new_tokens`` tokens greedily, whatever the
end-of-sequence token.

The report says which responses differ from their cold run (the first difference of the first),
how many prompt tokens vLLM reused by its own count (``usage.prompt_tokens_details.cached_tokens``,
which a server reports only when started with ``--enable-prompt-tokens-details``), and the time to
first token, as streamed, of the resumed requests and of their cold runs.

    python -m pfx.integrations.vllm.verify --url URL [TRACE | --chat N [--turns T] [--seed S]]
        [--concurrency N] [--cold-url URL] [--model NAME] [--api-key KEY] [--timeout S] [--max-new-tokens N]
        [--json]
    python -m pfx.integrations.vllm.verify --model MODEL [--engine-args JSON] [TRACE | --chat N ...]

Exit status, as ``pfx``'s: 0 every response equalled its cold run; 1 a response differs, or the
check compared nothing that reuse could break (no response, or none resumed from the cache); 2 bad
input: an option, the trace, or a server that cannot be checked as asked (unreachable, no reset
endpoint, no reused-token counts, a request it refuses), named; 3 no verdict: the check could not do
what it says (a cold run that was not cold, a server that failed in the middle); 74 the output could
not be written; 130 and 143 stopped by SIGINT or SIGTERM (what ran is printed, and it did not pass).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import random
import signal
import statistics
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable, Generator, Optional, Sequence

from ... import _native
from ..._arguments import whole
from ..._progress import on_terminal
from ...fixtures.workloads import text_conversations
from ._check import BadInput, CheckError, Engine, Served, first_difference, start
from .conform import describe

__all__ = ["BadInput", "Chat", "CheckError", "Compared", "Engine", "Report", "Request", "Served", "Server", "Trace",
           "check", "main", "serve_concurrently", "start"]

PROGRAM = "python -m pfx.integrations.vllm.verify"
RESET_PATH = "/reset_prefix_cache"
NEW_TOKENS = 32
"""Tokens each request generates by default: enough that the rows decode wrote fill a block of vLLM's
(32 tokens on its CPU build), which the next turn may then take from the cache."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM came: the run stops where it is (a BaseException, as KeyboardInterrupt is,
    so that no handler of errors catches it)."""

    def __init__(self, signal_number: int):
        super().__init__(signal_number)
        self.signal_number = signal_number


@dataclasses.dataclass(frozen=True)
class Request:
    """One request of a workload: token ids for completions (`prompt`), or chat messages (`messages`)."""
    number: int                       # from 1, as pfx replay numbers requests
    line: int                         # its line in the trace (0: a generated chat)
    label: str                        # the trace's label, or "conversation c, turn t"
    max_tokens: int
    prompt: Optional[tuple] = None
    messages: Optional[tuple] = None  # ({"role": ..., "content": ...}, ...)
    clear_first: bool = False         # the trace has {"op": "clear"} before it: the cache is reset first


# ------------------------------------------------------------------------------------ the workloads

class Chat:
    """`conversations` generated conversations of `turns` turns (pfx.fixtures.workloads.text_conversations),
    served conversation after conversation through chat completions: each turn sends the system
    prompt, the turns before it with the answers vLLM gave, and the next message."""

    def __init__(self, conversations: int = 3, turns: int = 5, seed: int = 1, max_new_tokens: int = NEW_TOKENS):
        for name, value in (("conversations", conversations), ("turns", turns), ("max_new_tokens", max_new_tokens)):
            whole(name, value, 1, BadInput)
        whole("seed", seed, 0, BadInput)
        self.conversations, self.turns, self.seed, self.max_new_tokens = conversations, turns, seed, max_new_tokens

    def describe(self) -> str:
        """The workload in the report's words."""
        return (f"{_counted(self.conversations, 'conversation')} of {_counted(self.turns, 'turn')} (seed {self.seed}) "
                f"through chat completions, {self.max_new_tokens} new tokens each")

    def requests(self) -> Generator[Request, Served, None]:
        """The requests, each turn after the answer to the one before it is sent in (generator.send)."""
        for stream in self.streams():
            yield from stream

    def streams(self) -> list:
        """One generator a conversation, as requests() serves them, numbered as there: conversations that
        can be served at the same time."""
        chats = text_conversations(random.Random(self.seed), self.conversations, self.turns)
        return [self._conversation(number, conversation) for number, conversation in enumerate(chats, 1)]

    def _conversation(self, conversation_number: int, conversation) -> Generator[Request, Served, None]:
        messages = [{"role": "system", "content": conversation.system}]
        for turn, message in enumerate(conversation.messages, 1):
            messages.append({"role": "user", "content": message})
            served = yield Request((conversation_number - 1) * self.turns + turn, 0,
                                   f"conversation {conversation_number}, turn {turn}", self.max_new_tokens,
                                   messages=tuple(messages))
            messages.append({"role": "assistant", "content": served.text})


class Trace:
    """A trace of token-id prompts, read as pfx.verify reads one (a JSON Lines file of `pfx replay`'s
    format, or an iterable of its items): each request sent to completions; a clear resets the
    prefix cache before the next request. `max_new_tokens` serves a request that gives none."""

    def __init__(self, trace, max_new_tokens: int = NEW_TOKENS):
        whole("max_new_tokens", max_new_tokens, 1, BadInput)
        self.name = os.fspath(trace) if isinstance(trace, (str, os.PathLike)) else "a trace"
        try:
            self.items = _native._read_trace(trace, max_new_tokens=max_new_tokens, caller=PROGRAM)
        except OSError as error:
            raise BadInput(f"cannot read the trace {self.name}: {error.strerror or error}") from error
        except (TypeError, ValueError) as error:
            raise BadInput(str(error).removeprefix(PROGRAM + ": ")) from error
        if not self.items:
            raise BadInput(f"{self.name} holds no request: nothing to replay")
        for item in self.items:
            if item["max_new_tokens"] == 0:
                raise BadInput(f"{self.name}:{item['line']}: field \"max_new_tokens\": is 0: vLLM generates at least "
                              f"one token, and the check compares what it generates")

    def describe(self) -> str:
        """The workload in the report's words."""
        return f"{self.name}: {_counted(len(self.items), 'request')} through completions"

    def requests(self) -> Generator[Request, Served, None]:
        """The trace's requests, in order (what is sent in is not needed)."""
        for number, item in enumerate(self.items, 1):
            yield Request(number, item["line"], item["label"], item["max_new_tokens"], prompt=tuple(item["prompt"]),
                          clear_first=item["clear_first"])

    def streams(self) -> list:
        """The trace's requests served at the same time, each a stream of its own, in the trace's order:
        BadInput for a trace that clears the cache, since a clear amid requests in flight has no place."""
        clears = [item["line"] for item in self.items if item["clear_first"]]
        if clears:
            raise BadInput(f"{self.name}:{clears[0]}: a clear of the prefix cache cannot be replayed with requests in "
                          f"flight (--concurrency above 1): replay this trace one request at a time")
        return [_alone(request) for request in self.requests()]


def _alone(request: Request) -> Generator[Request, Served, None]:
    """A stream of one request."""
    yield request


# ------------------------------------------------------------------------------------ the transports

class Server:
    """A running OpenAI-compatible vLLM server at `url`, serving `model` (default: the one model it
    serves). Requests are streamed (the time to first token is the first streamed token's), greedy,
    with each token's id and logprob, and the usage with the reused-token count."""

    counter = "usage.prompt_tokens_details.cached_tokens"

    def __init__(self, url: str, *, model: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 600.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BadInput(f"{url!r} is not a server's URL: expected http://HOST:PORT")
        self.url = url.rstrip("/").removesuffix("/v1")
        self.api_key, self.timeout = api_key, timeout
        try:
            served = [entry["id"] for entry in self._call("GET", "/v1/models")["data"]]
        except urllib.error.HTTPError as error:
            key = " (is --api-key the server's?)" if error.code == 401 else ""
            raise BadInput(f"{self.url}/v1/models answered HTTP {error.code}: {_error_message(error)}{key}") from error
        except (urllib.error.URLError, OSError) as error:
            raise BadInput(f"cannot reach a server at {self.url}: {_reason(error)}") from error
        except (KeyError, TypeError) as error:
            raise BadInput(f"{self.url}/v1/models does not list models as an OpenAI-compatible server does") from error
        if model is None and len(served) != 1:
            raise BadInput(f"{self.url} serves {len(served)} models ({', '.join(served)}): name one with --model")
        if model is not None and model not in served:
            raise BadInput(f"{self.url} does not serve {model!r}; it serves {', '.join(served) or 'nothing'}")
        self.model = model if model is not None else served[0]
        try:
            self.version = str(self._call("GET", "/version").get("version", "?"))
        except (urllib.error.URLError, OSError, AttributeError):
            self.version = "?"  # another server than vLLM's: the report says so

    def describe(self) -> str:
        """The server in the report's words: vLLM's version, the URL, the model."""
        return f"vLLM {self.version} at {self.url}, model {self.model}"

    def reset(self) -> None:
        """POST /reset_prefix_cache: BadInput where the server has no such endpoint (vLLM serves it only
        with VLLM_SERVER_DEV_MODE=1); CheckError where vLLM says it did not reset."""
        for attempt in range(5):
            try:
                answer = self._call("POST", RESET_PATH)
            except urllib.error.HTTPError as error:
                if error.code in (404, 405):
                    raise BadInput(f"{self.url} has no POST {RESET_PATH}, with which a cold run is made: vLLM serves it "
                                  f"only when started with VLLM_SERVER_DEV_MODE=1 in its environment (a development "
                                  f"endpoint; keep such a server to yourself), or give --cold-url, a second server of "
                                  f"the same model with --no-enable-prefix-caching") from error
                raise
            if isinstance(answer, dict) and answer.get("success", True):
                return
            time.sleep(0.2 * (attempt + 1))  # vLLM refuses while a request still holds blocks
        raise CheckError(f"{self.url} did not reset its prefix cache ({RESET_PATH} said success false five times: is "
                         f"another client's request running?): a cold run would not be cold")

    def serve(self, request: Request) -> Served:
        """`request` streamed through completions (token ids) or chat completions (messages)."""
        body = {"model": self.model, "temperature": 0.0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}, "return_token_ids": True,
                "return_tokens_as_token_ids": True}
        if request.messages is not None:
            path = "/v1/chat/completions"
            body.update(messages=list(request.messages), max_completion_tokens=request.max_tokens, logprobs=True,
                        top_logprobs=0)
        else:
            path = "/v1/completions"
            body.update(prompt=list(request.prompt), max_tokens=request.max_tokens, logprobs=0)
        tokens, logprobs, text = [], [], []
        usage = None
        ttft = None
        start = time.perf_counter()
        for chunk in self._stream(path, body, request):
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                ids = choice.get("token_ids") or []
                if ids and ttft is None:
                    ttft = time.perf_counter() - start
                tokens += ids
                logprobs += _logprobs_of(choice.get("logprobs"))
                text.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
        if usage is None:
            raise CheckError(f"{self.url} sent no usage for request {request.number} (stream_options.include_usage)")
        if len(tokens) != len(logprobs) or not tokens:
            raise BadInput(f"{self.url} returned {len(tokens)} token ids and {len(logprobs)} logprobs for request "
                          f"{request.number}: the check needs vLLM's return_token_ids and logprobs")
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        return Served(tuple(tokens), tuple(logprobs), None if cached is None else int(cached),
                        int(usage.get("prompt_tokens", 0)), ttft, "".join(text))

    def no_counts(self) -> str:
        """Why a response without the reused-token count cannot be checked, and what to change."""
        return (f"{self.url} does not report the prompt tokens it reused ({self.counter}): start vLLM's server "
                f"with --enable-prompt-tokens-details")

    def _call(self, method: str, path: str):
        with urllib.request.urlopen(self._request(method, path), timeout=self.timeout) as answer:
            return json.loads(answer.read() or b"null")

    def _request(self, method: str, path: str, body=None) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        return urllib.request.Request(self.url + path, data=data, headers=headers, method=method)

    def _stream(self, path: str, body: dict, request: Request):
        """The JSON chunks of a streamed answer; BadInput naming the request when the server refuses it."""
        try:
            answer = urllib.request.urlopen(self._request("POST", path, body), timeout=self.timeout)
        except urllib.error.HTTPError as error:
            _refuse_or_fail(f"{self.url}{path}", request, error.code, _error_message(error))
        with answer:
            for raw in answer:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    return
                chunk = json.loads(data)
                if "error" in chunk:  # vLLM checks some of a request only once its answer has begun
                    error = chunk["error"] if isinstance(chunk["error"], dict) else {"message": chunk["error"]}
                    _refuse_or_fail(f"{self.url}{path}", request, error.get("code"), error.get("message", error))
                yield chunk


# ------------------------------------------------------------------------------------------ the check

@dataclasses.dataclass(frozen=True)
class Compared:
    """One request served, then cold: what differs first (None: equal bit for bit)."""
    request: Request
    served: Served
    cold: Served
    difference: Optional[str]


class Report:
    """What the check found. `ok` only when something resumed from the cache was compared and every
    response equalled its cold run; str() is the text report, to_json() the JSON one."""

    def __init__(self, target: str, cold: str, workload: str, counter: str):
        self.target, self.cold, self.workload, self.counter = target, cold, workload, counter
        self.rows: list = []
        self.concurrency = 1
        self.interrupted: Optional[int] = None
        self.elapsed_s = 0.0

    @property
    def compared(self) -> int:
        return len(self.rows)

    @property
    def resumed(self) -> list:
        return [row for row in self.rows if row.served.cached]

    @property
    def mismatches(self) -> list:
        return [row for row in self.rows if row.difference is not None]

    @property
    def prompt_tokens(self) -> int:
        return sum(row.served.prompt_tokens for row in self.rows)

    @property
    def reused_tokens(self) -> int:
        return sum(row.served.cached for row in self.rows)

    @property
    def unchecked(self) -> str:
        """Why the run vouches for nothing, or "": a check that compared nothing reuse could break fails."""
        if not self.rows:
            return "no response was compared with a cold run"
        if not self.resumed:
            return ("no request resumed from vLLM's prefix cache (every reused-token count was 0), so nothing reuse "
                    "could break was compared: is prefix caching on?")
        return ""

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.unchecked and self.interrupted is None

    @property
    def exit_status(self) -> int:
        if self.interrupted is not None:
            return 128 + self.interrupted
        return 0 if self.ok else 1

    def first_mismatch(self) -> Optional[str]:
        mismatches = self.mismatches
        if not mismatches:
            return None
        first = mismatches[0]
        return _native._describe_mismatches(len(mismatches), first.request.number, first.request.line,
                                            first.request.label, first.difference)

    def ttft_ms(self) -> Optional[dict]:
        """The median time to first token of the resumed requests and of their cold runs, where measured."""
        pairs = [(row.served.ttft_s, row.cold.ttft_s) for row in self.resumed
                 if row.served.ttft_s is not None and row.cold.ttft_s is not None]
        if not pairs:
            return None
        resumed = statistics.median(p[0] for p in pairs) * 1e3
        cold = statistics.median(p[1] for p in pairs) * 1e3
        return {"requests": len(pairs), "resumed_median": resumed, "cold_median": cold,
                "ratio": cold / resumed if resumed > 0 else None}

    def __str__(self) -> str:
        lines = [f"{PROGRAM}: {self.target}", f"workload: {self.workload}, greedy, one request at a time",
                 f"cold runs: {self.cold}",
                 f"{'#':>5} {'line':>5} {'request':<26} {'prompt':>7} {'cached':>7} {'ttft ms':>9} {'cold ms':>9} "
                 f"bit-exact"]
        for row in self.rows:
            request = row.request
            lines.append(f"{request.number:>5} {request.line or '-':>5} {_escaped(request.label or '-')[:26]:<26} "
                         f"{row.served.prompt_tokens:>7} {row.served.cached:>7} {_ms(row.served.ttft_s):>9} "
                         f"{_ms(row.cold.ttft_s):>9} {'yes' if row.difference is None else 'NO: ' + row.difference}")
        reuse = f"{self.reused_tokens / self.prompt_tokens:.1%}" if self.prompt_tokens else "-"
        lines.append(f"{_counted(self.compared, 'response')} compared with a cold run, {len(self.resumed)} resumed "
                     f"from the prefix cache, {_counted(len(self.mismatches), 'mismatch', 'mismatches')}; "
                     f"{self.elapsed_s:.1f} s")
        lines.append(f"reuse: {self.reused_tokens} of {self.prompt_tokens} prompt tokens ({reuse}), by vLLM's own "
                     f"count ({self.counter})")
        ttft = self.ttft_ms()
        if ttft is not None:
            ratio = f" ({ttft['ratio']:.2f}x)" if ttft["ratio"] else ""
            lines.append(f"time to first token, median of the {_counted(ttft['requests'], 'resumed request')}: "
                         f"{ttft['resumed_median']:.2f} ms resumed, {ttft['cold_median']:.2f} ms cold{ratio}")
        elif self.resumed:
            lines.append("time to first token: not measured (a vllm.LLM made with disable_log_stats=True keeps none)")
        if self.mismatches:
            lines.append(f"MISMATCH: {_escaped(self.first_mismatch())} (exit status 1)")
        if self.interrupted is not None:
            name = signal.Signals(self.interrupted).name
            lines.append(f"INTERRUPTED by {name} after {_counted(self.compared, 'request')}: the summary covers only "
                         f"what ran, and the run did not pass (exit status {self.exit_status})")
        elif self.unchecked:
            lines.append(f"FAILED: {self.unchecked} (exit status 1)")
        if self.ok:
            lines.append(f"{PROGRAM}: every check passed")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        first = self.mismatches[0] if self.mismatches else None
        report = {
            "type": "vllm_verify", "target": self.target, "cold": self.cold, "workload": self.workload,
            "concurrency": self.concurrency,
            "requests": self.compared, "compared": self.compared, "resumed": len(self.resumed),
            "mismatches": len(self.mismatches), "prompt_tokens": self.prompt_tokens,
            "reused_tokens": self.reused_tokens,
            "reuse_fraction": self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "ttft_ms": self.ttft_ms(),
            "first_mismatch": None if first is None else {
                "request": first.request.number, "line": first.request.line, "label": first.request.label,
                "what": first.difference, "text": self.first_mismatch()},
            "responses": [_row_json(row) for row in self.rows],
            "elapsed_s": self.elapsed_s, "interrupted": self.interrupted, "ok": self.ok,
            "exit_status": self.exit_status}
        if self.unchecked:
            report["unchecked"] = self.unchecked
        return json.dumps(report)


def check(target, workload, *, cold=None, progress: Optional[Callable[[int], None]] = None,
          concurrency: int = 1) -> Report:
    """Replays `workload` (Chat or Trace) through `target` (Server or Engine), one request at a time:
    each request served as it comes, then cold (after target.reset(), or by `cold`, a second Server
    without prefix caching), compared bit for bit. With `concurrency` above 1 (a Server only), the
    workload's streams are served `concurrency` at a time first, and then each request cold, alone
    (serve_concurrently()). Returns the Report; raises BadInput for bad input (a target that does not
    report its reused tokens, a request it refuses), CheckError where a cold run was not cold. A SIGINT
    (KeyboardInterrupt) or an Interrupted stops it: the Report then covers what ran and says so."""
    whole("concurrency", concurrency, 1, BadInput)
    if concurrency > 1 and not isinstance(target, Server):
        raise BadInput("--concurrency above 1 needs a server (--url): a vllm.LLM in this process serves one call at a "
                      "time")
    report = Report(_describe(target),
                    "the same server after POST " + RESET_PATH if cold is None and isinstance(target, Server) else
                    "the same engine after reset_prefix_cache()" if cold is None else
                    f"{_describe(cold)}, which must not cache prefixes (--no-enable-prefix-caching)",
                    workload.describe() + (f", {concurrency} requests in flight" if concurrency > 1 else ""),
                    target.counter)
    report.concurrency = concurrency
    began = time.monotonic()
    if concurrency > 1:
        streams = workload.streams()  # bad input (a trace with clears) is refused before anything is served
    try:
        if cold is None:
            target.reset()  # a known start, and the endpoint found before any request is served
        if concurrency > 1:
            for request, served in serve_concurrently(target, streams, concurrency):
                _compare(report, target, cold, request, served)
                if progress:
                    progress(report.compared)
            report.elapsed_s = time.monotonic() - began
            return report
        requests = workload.requests()
        request = next(requests, None)
        while request is not None:
            if request.clear_first:
                target.reset()
            served = _serve(target, request)
            _compare(report, target, cold, request, served)
            if progress:
                progress(report.compared)
            try:
                request = requests.send(served)
            except StopIteration:
                request = None
    except KeyboardInterrupt:
        report.interrupted = signal.SIGINT.value
    except Interrupted as stop:
        report.interrupted = stop.signal_number
    report.elapsed_s = time.monotonic() - began
    return report


def _serve(target, request: Request) -> Served:
    """`request` served by `target`: a Server takes the request as it is; vLLM in this process (Engine)
    serves its token ids or its chat, and a request it refuses is a BadInput naming the request."""
    if isinstance(target, Server):
        return target.serve(request)
    try:
        if request.messages is not None:
            return target.chat(request.messages, request.max_tokens)
        return target.serve(request.prompt, request.max_tokens)
    except BadInput as error:
        raise BadInput(f"vLLM refused {_where(request)}: {error}") from error


def _describe(target) -> str:
    """The target in the report's words: a server's own, or vLLM's version and configuration, in this process."""
    if isinstance(target, Server):
        return target.describe()
    return describe(target.llm, target.llm.llm_engine.vllm_config.model_config.model) + ", in this process"


def _where(request: Request) -> str:
    return f"request {request.number}" + (f" (line {request.line})" if request.line else "")


def _compare(report: Report, target, cold, request: Request, served: Served) -> None:
    """`request`, served as `served`, served cold (after target.reset(), or by `cold`) and compared bit
    for bit: a row of the report."""
    if served.cached is None:
        raise BadInput(target.no_counts())
    if cold is None:
        target.reset()
        reference = _serve(target, request)
    else:
        reference = _serve(cold, request)
    if reference.cached:
        raise CheckError(f"the cold run of request {request.number} took {reference.cached} prompt tokens from "
                         f"the prefix cache: it was not cold")
    difference = first_difference(served, reference)
    report.rows.append(Compared(request, served, reference, None if difference is None else _what(difference)))


def serve_concurrently(target, streams: list, concurrency: int) -> list:
    """`streams` (generators of requests, each taking the answer to its last request by send()) served
    by `concurrency` threads, each taking the next stream and serving it to its end, so that up to
    `concurrency` requests are in flight at once: [(request, response)] in the requests' numbers'
    order. The first error stops the threads after their request in flight and is raised."""
    pending = iter(streams)
    lock = threading.Lock()
    stop = threading.Event()
    served: list = []

    def worker() -> None:
        while not stop.is_set():
            with lock:
                stream = next(pending, None)
            if stream is None:
                return
            request = next(stream, None)
            try:
                while request is not None and not stop.is_set():
                    response = _serve(target, request)
                    with lock:
                        served.append((request, response))
                    request = stream.send(response)
            except StopIteration:
                pass
            except BaseException:
                stop.set()
                raise

    with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="pfx-verify") as pool:
        futures = [pool.submit(worker) for _ in range(concurrency)]
        try:
            for future in futures:
                future.result()
        except BaseException:
            stop.set()
            raise
    return sorted(served, key=lambda pair: pair[0].number)


# ------------------------------------------------------------------------------------------ the words

def _what(difference: dict) -> str:
    """first_difference's answer in pfx replay's words, a logprob with all its bits."""
    step, got, expected = difference["step"], difference["got"], difference["expected"]
    if difference["where"] == "generated":
        def token(t):
            return "none" if t == -1 else str(t)
        return f"generated token {step}: {token(got)} vs {token(expected)} cold"
    return f"logprob of generated token {step}: {_bits(got)} vs {_bits(expected)} cold"


def _bits(x: float) -> str:
    return f"{x!r} (0x{struct.pack('>d', x).hex()})"


def _logprobs_of(logprobs) -> list:
    """The chosen tokens' logprobs of a streamed choice: completions' token_logprobs, chat's content."""
    if not logprobs:
        return []
    if logprobs.get("content") is not None:
        return [entry["logprob"] for entry in logprobs["content"]]
    return list(logprobs.get("token_logprobs") or [])


def _row_json(row: Compared) -> dict:
    def ms(seconds):
        return None if seconds is None else seconds * 1e3
    return {"request": row.request.number, "line": row.request.line, "label": row.request.label,
            "prompt_tokens": row.served.prompt_tokens, "generated_tokens": len(row.served.tokens),
            "cached_tokens": row.served.cached, "cold_cached_tokens": row.cold.cached,
            "ttft_ms": ms(row.served.ttft_s), "cold_ttft_ms": ms(row.cold.ttft_s),
            "bitexact": row.difference is None, "mismatch": row.difference}


def _refuse_or_fail(endpoint: str, request: Request, code, message) -> None:
    """Raises BadInput where the server refused the request (HTTP 4xx: bad input, such as a token id
    outside the vocabulary), RuntimeError where it failed (no verdict)."""
    if isinstance(code, int) and 400 <= code < 500:
        raise BadInput(f"{endpoint} refused {_where(request)}: HTTP {code}: {message}")
    raise RuntimeError(f"{endpoint} failed {_where(request)}: HTTP {code}: {message}")


def _error_message(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read() or b"null")
    except (ValueError, OSError):
        return error.reason or ""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])
        if "message" in body:
            return str(body["message"])
    return json.dumps(body)


def _reason(error: Exception) -> str:
    return str(getattr(error, "reason", None) or error)


def _counted(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def _escaped(text: str) -> str:
    """Text from a trace, printed with every control character as \\xHH, as pfx prints it."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in text)


# ------------------------------------------------------------------------------------ the command line

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description=__doc__.split("\n\n")[0],
        epilog="Verdicts and exit statuses: 0 every response equalled its cold run (every check passed); 1 a "
               "response differs (MISMATCH), or nothing reuse could break was compared (FAILED); 2 bad input: an "
               "option, the trace, or a server that cannot be checked as asked; 3 no verdict (a cold run that was "
               "not cold, a server that failed in the middle); 74 the output could not be written; 130 and 143 "
               "stopped by SIGINT or SIGTERM (INTERRUPTED: what ran is printed, and it did not pass).")
    parser.add_argument("trace", nargs="?", help="a JSON Lines trace of token ids, as pfx replay reads one "
                                                 "(default: a generated chat, --chat)")
    parser.add_argument("--url", help="a running OpenAI-compatible vLLM server (http://HOST:PORT)")
    parser.add_argument("--cold-url", help="a second server of the same model, without prefix caching and computing as "
                                           "--url's does (with pfx's plugin: PFX_VLLM=1 there too), for the cold "
                                           "runs (default: POST /reset_prefix_cache on --url)")
    parser.add_argument("--model", help="with --url: the served model to use (default: the one served); without: "
                                        "the model vLLM loads in this process")
    parser.add_argument("--engine-args", default="{}", help="without --url: vllm.LLM's keyword arguments, a JSON "
                                                            "object, such as '{\"block_size\": 32}' (default {})")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                        help="the servers' API key (default: OPENAI_API_KEY)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds a server may take for one request (default 600)")
    parser.add_argument("--chat", type=int, default=None, help="conversations of the generated chat (default 3)")
    parser.add_argument("--turns", type=int, default=None, help="turns of each conversation (default 5)")
    parser.add_argument("--seed", type=int, default=None, help="the generated chat's seed (default 1)")
    parser.add_argument("--max-new-tokens", type=int, default=NEW_TOKENS,
                        help=f"tokens each request generates (default {NEW_TOKENS}; a trace line's max_new_tokens "
                             f"comes first)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="requests in flight at once, as a loaded server serves them (default 1: one at a "
                             "time); each response is still compared with its cold run served alone. Needs --url")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (default: text)")
    parser.add_argument("--no-progress", action="store_true",
                        help="draw no progress bar on a terminal (default: one on a terminal, none elsewhere)")
    return parser


def _workload(arguments) -> Chat | Trace:
    if arguments.trace is not None:
        for option in ("chat", "turns", "seed"):
            if getattr(arguments, option) is not None:
                raise BadInput(f"--{option} is an option of the generated chat, not of a trace")
        return Trace(arguments.trace, arguments.max_new_tokens)
    return Chat(3 if arguments.chat is None else arguments.chat, 5 if arguments.turns is None else arguments.turns,
                1 if arguments.seed is None else arguments.seed, arguments.max_new_tokens)


def _targets(arguments):
    """(target, cold): the server(s) of --url and --cold-url, or an engine started on --model."""
    whole("--concurrency", arguments.concurrency, 1, BadInput)
    if arguments.concurrency > 1 and arguments.url is None:
        raise BadInput("--concurrency above 1 needs a server (--url): a vllm.LLM in this process serves one call at a "
                      "time")
    if arguments.url is not None:
        if arguments.engine_args != "{}":
            raise BadInput("--engine-args sets up vLLM in this process; a server at --url was set up when it started")
        cold = None
        target = Server(arguments.url, model=arguments.model, api_key=arguments.api_key, timeout=arguments.timeout)
        if arguments.cold_url is not None:
            cold = Server(arguments.cold_url, model=target.model, api_key=arguments.api_key, timeout=arguments.timeout)
        return target, cold
    if arguments.cold_url is not None:
        raise BadInput("--cold-url is the cold side of --url: vLLM in this process makes its cold runs after a reset")
    if arguments.model is None:
        raise BadInput("give --url URL (a running vLLM server) or --model MODEL (vLLM in this process)")
    try:
        engine_args = json.loads(arguments.engine_args)
    except ValueError as error:
        raise BadInput(f"--engine-args: {error}") from error
    if not isinstance(engine_args, dict):
        raise BadInput(f"--engine-args: expected a JSON object of vllm.LLM's keyword arguments, got "
                      f"{arguments.engine_args}")
    try:
        import vllm  # noqa: F401
    except ImportError as error:
        raise BadInput(f"vLLM cannot be imported here ({error}): --model runs it in this process; --url checks a "
                      f"server from anywhere") from error
    return Engine(start(arguments.model, **engine_args)), None


def _raise_interrupted(signal_number, _frame):
    raise Interrupted(signal_number)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (the module's docstring): prints the report, returns the exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    previous = {}
    with contextlib.suppress(ValueError):  # signals are the main thread's: elsewhere a run is stopped as any call
        for number in (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, _raise_interrupted)
    bar = None
    try:
        workload = _workload(arguments)  # bad input is refused before a server is asked or vLLM starts
        target, cold = _targets(arguments)
        bar = None if arguments.no_progress or arguments.json else on_terminal("requests")
        total = workload.conversations * workload.turns if isinstance(workload, Chat) else len(workload.items)
        report = check(target, workload, cold=cold, progress=None if bar is None else lambda done: bar(done, total),
                       concurrency=arguments.concurrency)
    except BadInput as error:
        print(f"{PROGRAM}: {error}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(f"{PROGRAM}: INTERRUPTED by {signal.Signals(stop.signal_number).name} before any request was compared: "
              f"the run did not pass", file=sys.stderr)
        return 128 + stop.signal_number
    except Exception as error:  # noqa: BLE001 - no verdict: never an exit status a verdict has
        print(f"{PROGRAM}: no verdict: {type(error).__name__}: {error}", file=sys.stderr)
        return 3
    finally:
        if bar is not None:
            bar.close()
        for number, handler in previous.items():
            signal.signal(number, handler)
    try:
        sys.stdout.write(report.to_json() + "\n" if arguments.json else str(report))
        sys.stdout.flush()
    except OSError as error:
        print(f"{PROGRAM}: cannot write the output ({error.strerror or error})", file=sys.stderr)
        return 74
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
