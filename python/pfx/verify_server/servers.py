"""The servers the check knows, behind one face: ``connect(url)`` asks ``GET /v1/models`` who serves
the URL and returns the server that makes requests, and cold runs, its own way.

- vLLM's OpenAI-compatible server (``VllmServer``): requests streamed (the time to first token is
  the first streamed token's), token ids by ``return_token_ids``; a cold run after
  ``POST /reset_prefix_cache`` (served only with ``VLLM_SERVER_DEV_MODE=1``).
- llama.cpp's ``llama-server`` (``LlamaServer``): requests answered whole, token ids from the
  logprobs' ``id``, the time to first token the server's own ``timings.prompt_ms``; a cold run with
  ``cache_prompt: false``, which prefills the request from row 0.

- pfx's llama-cpp-python server (``LlamaCppPythonServer``, ``python -m
  pfx.integrations.llama_cpp.server``): chat requests answered whole, the tokens named by their text;
  a cold run with ``cache_prompt: false``, which that server adds. Stock llama-cpp-python's server,
  whose API makes no cold run, is refused by name.

Each reports the prompt tokens it reused in ``usage.prompt_tokens_details.cached_tokens``. Every request is greedy and generates its ``max_tokens`` whatever the
end-of-sequence token."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

from .compare import Served
from .errors import BadInput, CheckError
from .workloads import Request

COUNTER = "usage.prompt_tokens_details.cached_tokens"
RESET_PATH = "/reset_prefix_cache"


def connect(url: str, *, model: Optional[str] = None, api_key: Optional[str] = None, timeout: float = 600.0):
    """The server at `url`, serving `model` (default: the one model it serves): a VllmServer or a
    LlamaServer; BadInput naming why where the URL is not one the check can use."""
    http = _Http(url, api_key, timeout)
    try:
        listed = http.call("GET", "/v1/models")["data"]
        served = [entry["id"] for entry in listed]
        owners = {str(entry.get("owned_by")) for entry in listed}
    except urllib.error.HTTPError as error:
        key = " (is --api-key the server's?)" if error.code == 401 else ""
        raise BadInput(f"{http.url}/v1/models answered HTTP {error.code}: {error_message(error)}{key}") from error
    except (urllib.error.URLError, OSError) as error:
        raise BadInput(f"cannot reach a server at {http.url}: {getattr(error, 'reason', None) or error}") from error
    except (KeyError, TypeError, AttributeError) as error:
        raise BadInput(f"{http.url}/v1/models does not list models as an OpenAI-compatible server does") from error
    if model is None and len(served) != 1:
        raise BadInput(f"{http.url} serves {len(served)} models ({', '.join(served)}): name one with --model")
    if model is not None and model not in served:
        raise BadInput(f"{http.url} does not serve {model!r}; it serves {', '.join(served) or 'nothing'}")
    model = model if model is not None else served[0]
    if owners == {"vllm"}:
        return VllmServer(http, model)
    if owners == {"llamacpp"}:
        return LlamaServer(http, model)
    if owners == {"me"}:
        return LlamaCppPythonServer(http, model)
    raise BadInput(f"{http.url} answers as an OpenAI-compatible server, but not as one the check knows (owned_by "
                   f"{', '.join(sorted(owners))}): it makes cold runs on vLLM's server, llama-server and pfx's "
                   f"llama-cpp-python server")


class _Http:
    """JSON over HTTP to one server, with its API key."""

    def __init__(self, url: str, api_key: Optional[str], timeout: float):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BadInput(f"{url!r} is not a server's URL: expected http://HOST:PORT")
        self.url = url.rstrip("/").removesuffix("/v1")
        self.api_key, self.timeout = api_key, timeout

    def call(self, method: str, path: str, body=None):
        with urllib.request.urlopen(self.request(method, path, body), timeout=self.timeout) as answer:
            return json.loads(answer.read() or b"null")

    def request(self, method: str, path: str, body=None) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        return urllib.request.Request(self.url + path, data=data, headers=headers, method=method)

    def post(self, path: str, body: dict, request: Request):
        """The JSON answer to a request; BadInput naming the request where the server refuses it."""
        try:
            return self.call("POST", path, body)
        except urllib.error.HTTPError as error:
            refuse_or_fail(f"{self.url}{path}", request, error.code, error_message(error))


class _Server:
    """What every server the check knows has: its URL, the model asked, the reused-token count's name,
    and requests that may be in flight together."""

    counter = COUNTER
    concurrent = True

    def __init__(self, http: _Http, model: str):
        self.http, self.url, self.model = http, http.url, model

    def _said(self, path: str, key: str) -> str:
        """`key` of what GET `path` answers, or "?" where the server says nothing of it."""
        try:
            return str(self.http.call("GET", path).get(key, "?"))
        except (urllib.error.URLError, OSError, AttributeError, ValueError):
            return "?"


class VllmServer(_Server):
    """A running OpenAI-compatible vLLM server."""

    def __init__(self, http: _Http, model: str):
        super().__init__(http, model)
        self.version = self._said("/version", "version")

    def describe(self) -> str:
        """The server in the report's words: vLLM's version, the URL, the model."""
        return f"vLLM {self.version} at {self.url}, model {self.model}"

    def cold_words(self) -> str:
        return "the same server after POST " + RESET_PATH

    def no_counts(self) -> str:
        """Why a response without the reused-token count cannot be checked, and what to change."""
        return (f"{self.url} does not report the prompt tokens it reused ({self.counter}): start vLLM's server "
                f"with --enable-prompt-tokens-details")

    def no_reuse(self) -> str:
        return "is prefix caching on?"

    def cold(self, request: Request) -> Served:
        self.reset()
        return self.serve(request)

    def reset(self) -> None:
        """POST /reset_prefix_cache: BadInput where the server has no such endpoint (vLLM serves it only
        with VLLM_SERVER_DEV_MODE=1); CheckError where vLLM says it did not reset."""
        for attempt in range(5):
            try:
                answer = self.http.call("POST", RESET_PATH)
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
                logprobs += _chosen_logprobs(choice.get("logprobs"))
                text.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
        if usage is None:
            raise CheckError(f"{self.url} sent no usage for request {request.number} (stream_options.include_usage)")
        if len(tokens) != len(logprobs) or not tokens:
            raise BadInput(f"{self.url} returned {len(tokens)} token ids and {len(logprobs)} logprobs for request "
                           f"{request.number}: the check needs vLLM's return_token_ids and logprobs")
        return Served(tuple(tokens), tuple(logprobs), _cached(usage), int(usage.get("prompt_tokens", 0)), ttft,
                      "".join(text))

    def _stream(self, path: str, body: dict, request: Request):
        """The JSON chunks of a streamed answer; BadInput naming the request when the server refuses it."""
        try:
            answer = urllib.request.urlopen(self.http.request("POST", path, body), timeout=self.http.timeout)
        except urllib.error.HTTPError as error:
            refuse_or_fail(f"{self.url}{path}", request, error.code, error_message(error))
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
                    refuse_or_fail(f"{self.url}{path}", request, error.get("code"), error.get("message", error))
                yield chunk


class LlamaServer(_Server):
    """A running llama.cpp llama-server (with --pfx or without)."""

    COLD = {"cache_prompt": False}

    def __init__(self, http: _Http, model: str):
        super().__init__(http, model)
        self.build = self._said("/props", "build_info")

    def describe(self) -> str:
        return f"llama-server {self.build} at {self.url}, model {self.model}"

    def cold_words(self) -> str:
        return "the same server with cache_prompt: false (the request prefilled from row 0)"

    def no_counts(self) -> str:
        return f"{self.url} does not report the prompt tokens it reused ({self.counter})"

    def no_reuse(self) -> str:
        return "does the server keep its prompt cache (cache_prompt), and do the requests share a prefix?"

    def cold(self, request: Request) -> Served:
        return self.serve(request, self.COLD)

    def serve(self, request: Request, extra: Optional[dict] = None) -> Served:
        """`request` through completions (token ids) or chat completions (messages), answered whole."""
        path, body = self._asked(request)
        answer = self.http.post(path, {**body, **(extra or {})}, request)
        try:
            choice, usage = answer["choices"][0], answer["usage"]
            content = (choice.get("logprobs") or {}).get("content") or []
            tokens = tuple(self._token(entry) for entry in content)
            logprobs = tuple(float(entry["logprob"]) for entry in content)
            text = (choice.get("message") or {}).get("content") or choice.get("text") or ""
            prompt_ms = (answer.get("timings") or {}).get("prompt_ms")
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise CheckError(f"{self.url}{path} answered request {request.number} in a shape the check does not "
                             f"know ({type(error).__name__}: {error})") from error
        if not tokens:
            raise BadInput(f"{self.url} returned no logprobs for request {request.number}: {self.no_logprobs}")
        return Served(tokens, logprobs, _cached(usage), int(usage.get("prompt_tokens", 0)),
                      None if prompt_ms is None else float(prompt_ms) / 1e3, text)

    no_logprobs = "the check needs llama-server's logprobs, with token ids"

    def _asked(self, request: Request) -> tuple:
        """(path, body) of `request`: greedy, its max_tokens whatever the end-of-sequence token."""
        body = {"model": self.model, "temperature": 0.0, "ignore_eos": True, "max_tokens": request.max_tokens}
        if request.messages is not None:
            return "/v1/chat/completions", dict(body, messages=list(request.messages), logprobs=True, top_logprobs=1)
        return "/v1/completions", dict(body, prompt=list(request.prompt), logprobs=1, n_probs=1)

    @staticmethod
    def _token(entry: dict):
        return int(entry["id"])


class LlamaCppPythonServer(LlamaServer):
    """pfx's server of llama-cpp-python (``python -m pfx.integrations.llama_cpp.server``), whose API
    pfx.integrations.llama_cpp.server_api extends with what llama-server has: the reused-token count
    and ``cache_prompt: false``. Its answers name the generated tokens by their text (its logprobs give
    no id), and it takes text prompts only. Stock llama-cpp-python's server has neither, and is
    refused by name."""

    def __init__(self, http: _Http, model: str):
        _Server.__init__(self, http, model)
        try:
            self.rules = http.call("GET", "/pfx")["rules"]
        except (urllib.error.URLError, OSError, KeyError, TypeError, ValueError) as error:
            raise BadInput(f"{http.url} is llama-cpp-python's own server, whose API neither makes a cold run nor says "
                           f"how many prompt tokens it reused ({COUNTER}): serve the model with python -m "
                           f"pfx.integrations.llama_cpp.server, which adds both, to check it") from error

    def describe(self) -> str:
        rule = self.rules.get(self.model)
        return f"llama-cpp-python's server with pfx's rule at {self.url}, model {self.model}" + (
            f" ({rule})" if rule else "")

    def cold_words(self) -> str:
        return "the same server with cache_prompt: false (pfx's server resets the context first)"

    def no_counts(self) -> str:
        return f"{self.url} did not report the prompt tokens it reused ({self.counter})"

    def no_reuse(self) -> str:
        return "do the requests share a prefix longer than keep_min?"

    no_logprobs = "start the server with --logits_all True"

    def _asked(self, request: Request) -> tuple:
        if request.messages is None:
            raise BadInput(f"llama-cpp-python's server takes text prompts only, not the token ids of {where(request)}: "
                           f"check it with a generated chat (--chat)")
        return super()._asked(request)

    @staticmethod
    def _token(entry: dict):
        return str(entry["token"])  # its logprobs name no id


def _cached(usage: dict) -> Optional[int]:
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return None if cached is None else int(cached)


def _chosen_logprobs(logprobs) -> list:
    """The chosen tokens' logprobs of a streamed choice: completions' token_logprobs, chat's content."""
    if not logprobs:
        return []
    if logprobs.get("content") is not None:
        return [entry["logprob"] for entry in logprobs["content"]]
    return list(logprobs.get("token_logprobs") or [])


def where(request: Request) -> str:
    return f"request {request.number}" + (f" (line {request.line})" if request.line else "")


def refuse_or_fail(endpoint: str, request: Request, code, message) -> None:
    """Raises BadInput where the server refused the request (HTTP 4xx: bad input, such as a token id
    outside the vocabulary), RuntimeError where it failed (no verdict)."""
    if isinstance(code, int) and 400 <= code < 500:
        raise BadInput(f"{endpoint} refused {where(request)}: HTTP {code}: {message}")
    raise RuntimeError(f"{endpoint} failed {where(request)}: HTTP {code}: {message}")


def error_message(error: urllib.error.HTTPError) -> str:
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
