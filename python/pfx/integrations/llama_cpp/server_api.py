"""What pfx's llama-cpp-python server adds to llama-cpp-python's OpenAI-compatible API, so that a
check of the running server (``python -m pfx.verify_server``) can do on it what it does on
llama-server:

- the reused-token count: a completion or chat completion answered whole carries
  ``usage.prompt_tokens_details.cached_tokens``, the rows pfx's rule let the request take from the
  context (llama-cpp-python's own usage has no such field);
- a cold run: a request with ``"cache_prompt": false`` resets the context first, so that its prompt
  is prefilled from row 0 (llama-server's field, which llama-cpp-python's own server ignores);
- ``GET /pfx``: the rule of each model loaded, by which a check knows this server from stock.

An ASGI middleware (``ReuseApi``) around the server's app reads the request's body and rewrites the
answer; the rule's shadow of each ``Llama``'s ``generate`` (``count_reuse``) resets and counts. The
two meet in a context variable that the server's worker thread inherits from the request's task."""
from __future__ import annotations

import contextvars
import json
from typing import Optional

COUNTED = ("/v1/completions", "/v1/chat/completions")
_REQUEST: contextvars.ContextVar[Optional[dict]] = contextvars.ContextVar("pfx_llama_cpp_request", default=None)


def count_reuse(llm, rule) -> None:
    """Shadows `llm`'s generate (the rule's own shadow): a request asked cold resets the context first,
    and the rows the rule allowed are kept for the request's answer."""
    generate = llm.generate

    def counted(tokens, *args, **kwargs):
        request = _REQUEST.get()
        if request is not None and request["cold"]:
            llm.reset()
        decided = False
        for token in generate(tokens, *args, **kwargs):
            if not decided and request is not None:  # the rule decided before the first token came
                request["cached"], decided = rule.last.offset, True
            yield token
        if not decided and request is not None:
            request["cached"] = rule.last.offset

    llm.generate = counted


class ReuseApi:
    """The ASGI middleware: `rules()` gives the rule of each model loaded, by name."""

    def __init__(self, app, rules):
        self.app, self.rules = app, rules

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/pfx" and scope["method"] == "GET":
            return await _send_json(send, 200, {"rules": {name: repr(rule) for name, rule in self.rules().items()}})
        if scope["path"] not in COUNTED or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            cold = json.loads(body or b"{}").get("cache_prompt", True) is False
        except (ValueError, AttributeError):
            cold = False  # the server's own validation answers a body that is not an object
        request = {"cold": cold, "cached": None}
        replayed = iter(messages)

        async def receive_again():
            message = next(replayed, None)
            return message if message is not None else await receive()

        held: dict = {}

        async def send_counted(message):
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if not headers.get(b"content-type", b"").startswith(b"application/json"):
                    return await send(message)  # a stream: passed as it comes
                held["start"], held["body"] = message, b""
                return None
            if "start" not in held:
                return await send(message)
            held["body"] += message.get("body", b"")
            if message.get("more_body"):
                return None
            return await _send_with_count(send, held["start"], held["body"], request["cached"])

        token = _REQUEST.set(request)
        try:
            await self.app(scope, receive_again, send_counted)
        finally:
            _REQUEST.reset(token)


async def _send_with_count(send, start, body: bytes, cached: Optional[int]) -> None:
    try:
        answer = json.loads(body)
        if cached is not None and isinstance(answer, dict) and isinstance(answer.get("usage"), dict):
            answer["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
            body = json.dumps(answer).encode()
    except ValueError:
        pass  # not JSON after all: passed as it is
    headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send(dict(start, headers=headers))
    await send({"type": "http.response.body", "body": body})


async def _send_json(send, status: int, answer) -> None:
    body = json.dumps(answer).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
