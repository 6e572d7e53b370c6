"""llama-cpp-python's OpenAI-compatible server with pfx's rule in charge of every model it loads
(docs/engines.md, "llama-cpp-python's Llama and its server"):

    python -m pfx.integrations.llama_cpp.server [--pfx-chunk N] [--pfx-keep-min N] SERVER-ARGUMENTS...

Every other argument is the server's own, as ``python -m llama_cpp.server`` takes them (``--model``,
``--n_ubatch``, ``--host``, ``--port``, ``--config_file``, ...), and so are its environment variables
(``CONFIG_FILE``, ``HOST``, ``PORT``): this runs that server's own ``main``, with each ``Llama`` it
loads (the default model at start, another when a request names it) passed to
``pfx.integrations.llama_cpp.enable`` before it serves. ``--pfx-chunk`` (default: what enable chooses
for each model: chunk 1 with the prefill step n_ubatch where flash attention is off and n_ubatch
divides n_batch, else the exact grid) and ``--pfx-keep-min`` (default 0) are enable's ``chunk`` and
``keep_min``. What the server adds to the API, so that ``python -m pfx.verify_server`` can check it
(the reused-token count, ``cache_prompt: false`` for a cold run, ``GET /pfx``), is
``pfx.integrations.llama_cpp.server_api``'s. A model pfx cannot
vouch for is refused with enable's error; an untested llama-cpp-python version stops the start with
exit status 2. Each decision is logged on standard error, one line a prompt:

    pfx: prompt of 171 tokens: the context held 122 of it, the rule allows 111 (reused, bound common_prefix)

The server's dependencies and the ``openai`` client: ``pip install '.[llama-cpp-python-server]'``.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional

from ..._arguments import count
from ._library import untested
from .rule import enable
from .server_api import ReuseApi, count_reuse

PROGRAM = "python -m pfx.integrations.llama_cpp.server"
_RULES: dict = {}  # the rule of each model loaded, by its alias (GET /pfx)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, add_help=False, allow_abbrev=False,
        description="llama-cpp-python's server with pfx's rule on for every model it loads; every other argument "
                    "is the server's own (python -m llama_cpp.server --help)",
        epilog="Exit status: 2 a pfx option malformed, llama-cpp-python's server not importable or a version pfx "
               "was not tested with (before anything starts); 1 a model the rule cannot vouch for (enable's error, "
               "named); otherwise the server's own.")
    parser.add_argument("--pfx-chunk", type=count(1), default=None,
                        help="the rule's chunk, a multiple of each model's exact grid (default: enable's choice; "
                             "with flash attention off and n_ubatch dividing n_batch, 1 with the prefill step "
                             "n_ubatch, else the grid)")
    parser.add_argument("--pfx-keep-min", type=count(0), default=0, help="the fewest tokens worth reusing (default 0)")
    return parser


def install(chunk: Optional[int] = None, keep_min: int = 0) -> None:
    """Makes the server's model loader (``LlamaProxy.load_llama_from_model_settings``) enable pfx's
    rule on each Llama it loads, in this process."""
    from llama_cpp.server.model import LlamaProxy  # noqa: PLC0415  (the server's dependencies are optional)

    load = LlamaProxy.load_llama_from_model_settings

    def load_with_the_rule(settings):
        llm = load(settings)
        try:
            rule = enable(llm, chunk=chunk, keep_min=keep_min)
        except (TypeError, ValueError, RuntimeError) as e:
            llm.close()
            raise RuntimeError(f"pfx: the model {settings.model}: {e}") from e
        logging.getLogger("pfx.llama_cpp").info("pfx: %s under pfx's rule: %r", settings.model, rule)
        count_reuse(llm, rule)
        _RULES[settings.model_alias or settings.model] = rule
        return llm

    LlamaProxy.load_llama_from_model_settings = staticmethod(load_with_the_rule)


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser()
    ours, theirs = parser.parse_known_args(argv)
    if "-h" in theirs or "--help" in theirs:
        parser.print_help()
        print()
    try:
        import llama_cpp  # noqa: PLC0415
        import llama_cpp.server.__main__ as server  # noqa: PLC0415
    except ImportError as e:
        print(f"{PROGRAM}: llama-cpp-python's server does not import here ({e}); pip install '.[llama-cpp-python-server]' "
              "installs its dependencies (scripts/llama.sh --python installs llama-cpp-python)", file=sys.stderr)
        return 2
    reason = untested(llama_cpp)
    if reason:
        print(f"{PROGRAM}: {reason}; run python -m llama_cpp.server to serve without pfx", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("pfx.llama_cpp")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    install(ours.pfx_chunk, ours.pfx_keep_min)
    create_app = server.create_app

    def create_app_with_the_api(*args, **kwargs):
        app = create_app(*args, **kwargs)
        app.add_middleware(ReuseApi, rules=lambda: dict(_RULES))
        return app

    server.create_app = create_app_with_the_api
    sys.argv = [PROGRAM] + theirs  # the server's main parses sys.argv
    server.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
