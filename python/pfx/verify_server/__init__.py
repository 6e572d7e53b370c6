"""pfx's check of a running server: does each response equal a cold run of the same request, bit for
bit (docs/engines.md, "Checking a server")?

    python -m pfx.verify_server --url URL [TRACE | --chat N [--turns T] [--seed S]] [--concurrency N]
        [--cold-url URL] [--model NAME] [--api-key KEY] [--timeout S] [--max-new-tokens N] [--json]
    python -m pfx.verify_server --model MODEL [--engine-args JSON] [TRACE | --chat N ...]

(``pfx-verify-server`` is the same command, installed with the package.) It finds out what serves ``--url``
(``GET /v1/models``): vLLM's OpenAI-compatible server, llama.cpp's ``llama-server`` or pfx's
llama-cpp-python server, each checked through its own API and cold runs made its own way
(``pfx.verify_server.servers``); stock llama-cpp-python's server, which makes no cold run, is refused
by name. Without ``--url``, ``--model`` checks a ``vllm.LLM`` in this
process (``check(InProcess(llm), ...)`` in code).

It replays a workload, one request at a time or ``--concurrency N`` at once. Each request is served
twice: first as it comes, from whatever the server's cache holds, then cold, and the two are compared
bit for bit: every generated token and its logprob. With ``--concurrency N`` the workload is served as
a loaded server serves it, N requests in flight (N conversations at a time, each turn after the answer
to the one before; a trace's requests N at a time), and only then is each request served cold, alone,
one after the other: a response must equal its cold run served alone whatever the server batched
beside it. A cold run may instead come from a second server of the same model without prefix caching
(``--cold-url``), which must compute as the first does (with pfx's vLLM plugin on the first, start the
second with ``PFX_VLLM=1`` too: the plugin's batch invariance changes vLLM's kernels). The workload is
a generated chat (``--chat N``: N conversations of ``--turns`` turns through chat completions, each
turn holding the answers before it, as a chat client sends them) or a JSON Lines trace of token ids as
``pfx replay`` reads one (docs/cli.md, "Trace format"), sent to completions. Every request generates
``--max-new-tokens`` tokens greedily, whatever the end-of-sequence token.

The report says which responses differ from their cold run (the first difference of the first),
how many prompt tokens the server reused by its own count (``usage.prompt_tokens_details.cached_tokens``;
vLLM reports it only when started with ``--enable-prompt-tokens-details``), and the time to first
token of the resumed requests and of their cold runs.

Exit status, as ``pfx``'s: 0 every response equalled its cold run (every check passed); 1 a response
differs (MISMATCH), or the check compared nothing that reuse could break (FAILED: no response, or none
resumed from the cache); 2 bad input: an option, the trace, or a server that cannot be checked as asked
(unreachable, not one the check knows, no cold run, no reused-token counts, a request it refuses),
named; 3 no verdict: the check could not do what it says (a cold run that was not cold, a server that
failed in the middle); 74 the output could not be written; 130 and 143 stopped by SIGINT or SIGTERM
(INTERRUPTED: what ran is printed, and it did not pass).
"""
from __future__ import annotations

from .check import Interrupted, check, serve_concurrently
from .command import main
from .compare import Served, first_difference
from .errors import BadInput, CheckError
from .in_process import InProcess
from .report import Compared, Report
from .servers import LlamaCppPythonServer, LlamaServer, VllmServer, connect
from .workloads import NEW_TOKENS, PROGRAM, Chat, Request, Trace

__all__ = ["BadInput", "Chat", "CheckError", "Compared", "InProcess", "Interrupted", "LlamaCppPythonServer", "LlamaServer", "NEW_TOKENS",
           "PROGRAM", "Report", "Request", "Served", "Trace", "VllmServer", "check", "connect", "first_difference",
           "main", "serve_concurrently"]
