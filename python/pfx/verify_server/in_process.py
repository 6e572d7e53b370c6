"""vLLM in this process as the check's target (``--model`` without ``--url``; ``check(InProcess(llm),
...)`` in code): a ``vllm.LLM`` serving the requests one call at a time, its cold runs after
``reset_prefix_cache()``."""
from __future__ import annotations

from .compare import Served
from .errors import BadInput
from .servers import where
from .workloads import Request


class InProcess:
    """A vllm.LLM, or pfx.integrations.vllm's Engine around one (a test may stand in an object with its
    serve(prompt, max_tokens), chat(messages, max_tokens), reset(), no_counts() and llm)."""

    concurrent = False

    def __init__(self, engine):
        if not hasattr(engine, "serve"):
            from ..integrations.vllm._check import Engine
            engine = Engine(engine)
        self.engine = engine
        self.counter = getattr(engine, "counter", "num_cached_tokens")

    def describe(self) -> str:
        from ..integrations.vllm.conform import describe
        llm = self.engine.llm
        return describe(llm, llm.llm_engine.vllm_config.model_config.model) + ", in this process"

    def cold_words(self) -> str:
        return "the same engine after reset_prefix_cache()"

    def no_counts(self) -> str:
        return self.engine.no_counts()

    def no_reuse(self) -> str:
        return "is prefix caching on?"

    def reset(self) -> None:
        """Empties vLLM's prefix cache: a known start, a trace's clear, and before each cold run."""
        self.engine.reset()

    def cold(self, request: Request) -> Served:
        self.reset()
        return self.serve(request)

    def serve(self, request: Request) -> Served:
        """`request`'s token ids or chat, served; a request vLLM refuses is a BadInput naming it."""
        try:
            if request.messages is not None:
                return self.engine.chat(request.messages, request.max_tokens)
            return self.engine.serve(request.prompt, request.max_tokens)
        except BadInput as error:
            raise BadInput(f"vLLM refused {where(request)}: {error}") from error
