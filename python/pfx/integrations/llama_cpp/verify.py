"""pfx's check of a running llama.cpp llama-server: does each resumed response equal a cold run of
the same request, bit for bit (docs/engines.md, "llama-server")?

It plays generated chats (``pfx.fixtures.workloads.text_conversations``: a shared system prompt, then
each turn holding the answers before it, as a chat client sends them) through the server's
``/v1/chat/completions`` with the official openai client, one request at a time (pfx vouches for a
request served alone). Each turn is served twice: first as it comes, from whatever the server's KV
cache holds, then cold (``cache_prompt: false``: the server prefills it from row 0). The two are
compared as text, finish reason and the logprob of every generated token and its top alternatives.
Reuse is the server's own count (``usage.prompt_tokens_details.cached_tokens``).

With ``--concurrency N`` it plays N chats at once instead, as N clients of one server do: each turn of
the N chats is sent at the same time, so that the server decodes and prefills them in shared batches;
when every turn was served, each request is served again alone, cold, one at a time, and the two
answers are compared. A server whose answers depend on what they were batched with fails it.

    python -m pfx.integrations.llama_cpp.verify --url URL [--chat N] [--turns T] [--seed S]
        [--concurrency N] [--model NAME] [--max-tokens N] [--timeout S]

Exit status, as ``pfx``'s: 0 every response equalled its cold run and at least one was resumed from
the cache; 1 a response differs, or nothing resumed was compared; 2 bad input or a server that cannot
be checked (unreachable, no reused-token counts, a request it refuses), named; 3 no verdict: a cold run
that was not cold (the server reused rows for it).
"""
from __future__ import annotations

import argparse
import functools
import random
import sys
import threading
import time
from typing import Optional

from ..._arguments import count
from ...fixtures.workloads import text_conversations

PROGRAM = "python -m pfx.integrations.llama_cpp.verify"
COLD = {"cache_prompt": False}


class Unusable(Exception):
    """The server cannot be checked as asked (exit status 2)."""


def _answer(choice) -> tuple:
    content = choice.logprobs.content if choice.logprobs else None
    if content is None:
        raise Unusable("the server returned no logprobs for a chat completion with logprobs=true")
    return (choice.message.content, choice.finish_reason,
            [(t.token, t.logprob, [(top.token, top.logprob) for top in t.top_logprobs]) for t in content])


def _cached(response) -> int:
    details = response.usage.prompt_tokens_details if response.usage else None
    if details is None or details.cached_tokens is None:
        raise Unusable("the server reports no usage.prompt_tokens_details.cached_tokens: is it llama-server?")
    return int(details.cached_tokens)


class _NotCold(Exception):
    """A cold run reused rows: no verdict (exit status 3)."""


class _Tally:
    """The comparisons of a check: each response against its cold run, counted and said as it comes;
    the verdict at the end. The one comparison both checks make."""

    def __init__(self, out):
        self.out = out
        self.compared = self.resumed = self.differing = self.reused = self.prompt_tokens = 0

    def compare(self, chat: int, turn: int, served, cold, how: str) -> None:
        """`served` (as it came) against `cold` (cache_prompt false), said with `how` it was served."""
        if _cached(cold) != 0:
            raise _NotCold(f"the cold run of chat {chat} turn {turn} reused {_cached(cold)} tokens (cache_prompt: "
                           f"false was not honoured)")
        took = _cached(served)
        same = _answer(served.choices[0]) == _answer(cold.choices[0])
        self.compared += 1
        self.resumed += took > 0
        self.reused += took
        self.prompt_tokens += served.usage.prompt_tokens
        self.differing += not same
        print(f"chat {chat} turn {turn}: prompt {served.usage.prompt_tokens} tokens, {took} from the cache{how}: "
              f"{'equals' if same else 'DIFFERS from'} {'the request served alone' if how else 'its cold run'}",
              file=self.out)

    def verdict(self, what: str, differ: str) -> int:
        print(f"{self.compared} {what}, {self.resumed} of them resumed from the cache ({self.reused} of "
              f"{self.prompt_tokens} prompt tokens reused): {self.differing} differ", file=self.out)
        if self.differing:
            print(f"verdict: NOT exact: {differ}", file=self.out)
            return 1
        if self.resumed == 0:
            print("verdict: nothing resumed was compared, so nothing was checked", file=self.out)
            return 1
        print("verdict: exact", file=self.out)
        return 0


def _no_verdict(error: _NotCold, out) -> int:
    print(f"{PROGRAM}: no verdict: {error}", file=out)
    return 3


def at_once(calls: list, delays: Optional[list] = None) -> list:
    """Runs each of `calls` (no arguments) in a thread of its own, all released at once, each
    `delays[i]` seconds after that where `delays` is given; returns their results in order, or raises
    the first failure in the caller's thread."""
    results: list = [None] * len(calls)
    failures = []
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait()
        if delays:
            time.sleep(delays[i])
        try:
            results[i] = calls[i]()
        except Exception as e:  # raised again below, in the caller's thread
            failures.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return results


def check(client, model: str, chats: int, turns: int, seed: int, max_tokens: int, out=sys.stdout) -> int:
    """Plays the chats through `client` (an openai.OpenAI) and returns the exit status."""
    tally = _Tally(out)
    arguments = dict(model=model, max_tokens=max_tokens, temperature=0, logprobs=True, top_logprobs=2)
    try:
        for c, conversation in enumerate(text_conversations(random.Random(seed), chats, turns)):
            messages = [{"role": "system", "content": conversation.system}]
            for t, question in enumerate(conversation.messages):
                messages.append({"role": "user", "content": question})
                served = client.chat.completions.create(messages=messages, **arguments)
                cold = client.chat.completions.create(messages=messages, **arguments, extra_body=COLD)
                tally.compare(c, t, served, cold, "")
                messages.append({"role": "assistant", "content": cold.choices[0].message.content})
    except _NotCold as error:
        return _no_verdict(error, out)
    return tally.verdict("responses compared with a cold run", "resumed responses differ from their cold runs")


def check_concurrent(client, model: str, chats: int, turns: int, seed: int, max_tokens: int, out=sys.stdout) -> int:
    """Plays `chats` chats at once through `client`, turn by turn, then serves each request again alone
    and cold, and returns the exit status."""
    arguments = dict(model=model, max_tokens=max_tokens, temperature=0, logprobs=True, top_logprobs=2)
    conversations = text_conversations(random.Random(seed), chats, turns)
    histories = [[{"role": "system", "content": c.system}] for c in conversations]
    served = []  # (chat, turn, messages, response)
    for t in range(turns):
        for history, conversation in zip(histories, conversations):
            history.append({"role": "user", "content": conversation.messages[t]})
        responses = at_once([functools.partial(client.chat.completions.create, messages=list(history), **arguments)
                             for history in histories])
        for c, response in enumerate(responses):
            served.append((c, t, list(histories[c]), response))
            histories[c].append({"role": "assistant", "content": response.choices[0].message.content})
    tally = _Tally(out)
    try:
        for c, t, messages, response in served:
            alone = client.chat.completions.create(messages=messages, **arguments, extra_body=COLD)
            tally.compare(c, t, response, alone, f", served with {chats - 1} other chat(s) at once")
    except _NotCold as error:
        return _no_verdict(error, out)
    return tally.verdict(f"responses served {chats} at once compared with the same request served alone",
                         "answers served together differ from the same requests served alone")


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description=__doc__.split("\n\n")[0],
        epilog="Verdicts and exit statuses: 0 exact (every response equalled its cold run, at least one resumed "
               "from the cache); 1 NOT exact (a response differs), or nothing resumed was compared; 2 bad input or "
               "a server that cannot be checked (unreachable, no reused-token counts, a request it refuses); 3 no "
               "verdict (a cold run that was not cold).")
    parser.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8080 (required)")
    parser.add_argument("--chat", type=count(1), default=3, help="conversations (default 3)")
    parser.add_argument("--turns", type=count(2), default=4, help="turns of each (default 4)")
    parser.add_argument("--seed", type=int, default=1, help="the generated chats' seed (default 1)")
    parser.add_argument("--concurrency", type=count(1), default=1,
                        help="N: N chats (instead of --chat) sent at the same time, each turn, and each answer compared "
                             "with the same request served alone afterwards (default 1: one request at a time, each "
                             "compared with its cold run)")
    parser.add_argument("--model", default="model",
                        help="the model name sent (default 'model': llama-server serves its one model)")
    parser.add_argument("--max-tokens", type=count(1), default=24, help="tokens each answer generates (default 24)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a request may take (default 600)")
    arguments = parser.parse_args(argv)
    try:
        import openai  # noqa: PLC0415  (optional: pip install openai)
    except ImportError:
        print(f"{PROGRAM}: the openai client is not installed: pip install openai", file=sys.stderr)
        return 2
    client = openai.OpenAI(base_url=arguments.url.rstrip("/") + "/v1", api_key="none", timeout=arguments.timeout,
                           max_retries=0)
    try:
        if arguments.concurrency > 1:
            return check_concurrent(client, arguments.model, arguments.concurrency, arguments.turns, arguments.seed,
                                    arguments.max_tokens)
        return check(client, arguments.model, arguments.chat, arguments.turns, arguments.seed, arguments.max_tokens)
    except Unusable as e:
        print(f"{PROGRAM}: {arguments.url}: {e}", file=sys.stderr)
        return 2
    except openai.APIConnectionError as e:
        print(f"{PROGRAM}: {arguments.url}: cannot reach the server ({e})", file=sys.stderr)
        return 2
    except openai.APIStatusError as e:
        print(f"{PROGRAM}: {arguments.url}: the server refused a request: {e.status_code} {e.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
