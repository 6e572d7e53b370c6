"""The command line: ``python -m pfx.verify_server`` (and the installed ``pfx-verify-server``), whose usage the
package's docstring gives."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from typing import Optional, Sequence

from .._progress import on_terminal
from .._arguments import whole
from .check import Interrupted, check
from .errors import BadInput
from .in_process import InProcess
from .servers import connect
from .workloads import NEW_TOKENS, PROGRAM, Chat, Trace

DESCRIPTION = ("pfx's check of a running server (vLLM's, llama-server) or of vLLM in this process: does each "
               "response equal a cold run of the same request, bit for bit?")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description=DESCRIPTION,
        epilog="Verdicts and exit statuses: 0 every response equalled its cold run (every check passed); 1 a "
               "response differs (MISMATCH), or nothing reuse could break was compared (FAILED); 2 bad input: an "
               "option, the trace, or a server that cannot be checked as asked; 3 no verdict (a cold run that was "
               "not cold, a server that failed in the middle); 74 the output could not be written; 130 and 143 "
               "stopped by SIGINT or SIGTERM (INTERRUPTED: what ran is printed, and it did not pass).")
    parser.add_argument("trace", nargs="?", help="a JSON Lines trace of token ids, as pfx replay reads one "
                                                 "(default: a generated chat, --chat)")
    parser.add_argument("--url", help="a running server: vLLM's OpenAI-compatible server or llama.cpp's llama-server "
                                      "(http://HOST:PORT), which the check recognises")
    parser.add_argument("--cold-url", help="a second server of the same model, without prefix caching and computing as "
                                           "--url's does (with pfx's plugin: PFX_VLLM=1 there too), for the cold "
                                           "runs (default: --url's own: POST /reset_prefix_cache on vLLM, cache_prompt "
                                           "false on llama-server)")
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
    parser.add_argument("--max-new-tokens", "--max-tokens", type=int, default=NEW_TOKENS,
                        help=f"tokens each request generates (default {NEW_TOKENS}; a trace line's max_new_tokens "
                             f"comes first)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="requests in flight at once, as a loaded server serves them (default 1: one at a "
                             "time); each response is still compared with its cold run served alone. Needs --url")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (default: text)")
    parser.add_argument("--no-progress", action="store_true",
                        help="draw no progress bar on a terminal (default: one on a terminal, none elsewhere)")
    return parser


def _workload(arguments):
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
        target = connect(arguments.url, model=arguments.model, api_key=arguments.api_key, timeout=arguments.timeout)
        if arguments.cold_url is not None:
            cold = connect(arguments.cold_url, model=target.model, api_key=arguments.api_key, timeout=arguments.timeout)
        return target, cold
    if arguments.cold_url is not None:
        raise BadInput("--cold-url is the cold side of --url: vLLM in this process makes its cold runs after a reset")
    if arguments.model is None:
        raise BadInput("give --url URL (a running server) or --model MODEL (vLLM in this process)")
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
    from ..integrations.vllm._check import start
    return InProcess(start(arguments.model, **engine_args)), None


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
        total = len(workload)
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

