"""pfx on llama.cpp through llama-cpp-python (docs/python.md, docs/engines.md), one module a part:

- ``engine``: ``LlamaCppEngine``, an engine over llama-cpp-python's low-level API for pfx.Lane,
  pfx.conform and pfx.verify, its cache one llama_context;
- ``rule``: ``enable(llm)`` and ``disable(llm)``, pfx's rule in charge of the prefix reuse of
  llama-cpp-python's own ``Llama``;
- ``server``: llama-cpp-python's OpenAI-compatible server with the rule on for every model it loads
  (``python -m pfx.integrations.llama_cpp.server``).

A running llama.cpp ``llama-server`` (built with pfx's rule by ``scripts/llama.sh --server``) is
checked by the one check of every server, ``python -m pfx.verify_server --url URL``.

The engine's and the rule's names are here too, as users import them.
"""
from ._library import TESTED_VERSIONS
from .engine import LlamaCppEngine, each_row_of_sequence_state, rows_of_sequence_state
from .rule import LlamaRule, decisions, disable, enable, exact_grid

__all__ = ["LlamaCppEngine", "LlamaRule", "TESTED_VERSIONS", "decisions", "disable", "each_row_of_sequence_state",
           "enable", "exact_grid", "rows_of_sequence_state"]
