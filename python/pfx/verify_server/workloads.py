"""The workloads the check replays: a generated chat (``Chat``) or a trace of token ids (``Trace``),
each a sequence of ``Request``s, and the same split into streams that can be served at the same time
(``--concurrency``)."""
from __future__ import annotations

import dataclasses
import os
import random
from typing import Generator, Optional

from .. import _native
from .._arguments import whole
from ..fixtures.workloads import text_conversations
from .compare import Served
from .errors import BadInput
from .words import counted

PROGRAM = "python -m pfx.verify_server"
NEW_TOKENS = 32
"""Tokens each request generates by default: enough that the rows decode wrote fill a block of vLLM's
(32 tokens on its CPU build), which the next turn may then take from the cache."""


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
    prompt, the turns before it with the answers the server gave, and the next message."""

    def __init__(self, conversations: int = 3, turns: int = 5, seed: int = 1, max_new_tokens: int = NEW_TOKENS):
        for name, value in (("conversations", conversations), ("turns", turns), ("max_new_tokens", max_new_tokens)):
            whole(name, value, 1, BadInput)
        whole("seed", seed, 0, BadInput)
        self.conversations, self.turns, self.seed, self.max_new_tokens = conversations, turns, seed, max_new_tokens

    def describe(self) -> str:
        """The workload in the report's words."""
        return (f"{counted(self.conversations, 'conversation')} of {counted(self.turns, 'turn')} (seed {self.seed}) "
                f"through chat completions, {self.max_new_tokens} new tokens each")

    def __len__(self) -> int:
        return self.conversations * self.turns

    def clears(self) -> list:
        """The lines before which the cache is cleared: none in a generated chat."""
        return []

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
                raise BadInput(f"{self.name}:{item['line']}: field \"max_new_tokens\": is 0: a server generates at least "
                              f"one token, and the check compares what it generates")

    def describe(self) -> str:
        """The workload in the report's words."""
        return f"{self.name}: {counted(len(self.items), 'request')} through completions"

    def __len__(self) -> int:
        return len(self.items)

    def clears(self) -> list:
        """The trace's lines before which the cache is cleared ({"op": "clear"})."""
        return [item["line"] for item in self.items if item["clear_first"]]

    def requests(self) -> Generator[Request, Served, None]:
        """The trace's requests, in order (what is sent in is not needed)."""
        for number, item in enumerate(self.items, 1):
            yield Request(number, item["line"], item["label"], item["max_new_tokens"], prompt=tuple(item["prompt"]),
                          clear_first=item["clear_first"])

    def streams(self) -> list:
        """The trace's requests served at the same time, each a stream of its own, in the trace's order:
        BadInput for a trace that clears the cache, since a clear amid requests in flight has no place."""
        clears = self.clears()
        if clears:
            raise BadInput(f"{self.name}:{clears[0]}: a clear of the prefix cache cannot be replayed with requests in "
                          f"flight (--concurrency above 1): replay this trace one request at a time")
        return [alone(request) for request in self.requests()]


def alone(request: Request) -> Generator[Request, Served, None]:
    """A stream of one request."""
    yield request
