"""Adapters that let pfx drive engines people run, each over the engine's own KV cache (docs/python.md,
"Engines that own their cache"; docs/engines.md). One module or package per engine, imported on
demand, so that ``import pfx`` needs none of the frameworks:

- ``pfx.integrations.transformers``: ``TransformersEngine``, a Hugging Face transformers causal LM
  and its ``DynamicCache``, for ``pfx.Lane``, ``pfx.conform`` and ``pfx.verify``.
- ``pfx.integrations.llama_cpp``: ``LlamaCppEngine``, a GGUF model on one llama.cpp context over
  llama-cpp-python's low-level API (``scripts/llama.sh --python`` installs it); and ``enable(llm)``,
  pfx's rule in charge of the prefix reuse of llama-cpp-python's own ``Llama``
  (``pfx.integrations.llama_cpp.rule``).
- ``pfx.integrations.llama_cpp.server``: llama-cpp-python's OpenAI-compatible server with the rule on
  for every model it loads (``python -m pfx.integrations.llama_cpp.server --model M``).
- ``pfx.integrations.vllm``: the vLLM plugin (``PFX_VLLM=1``, or ``enable()``), pfx's rule in charge
  of vLLM's prefix cache; in its package, ``conform``, the conformance check of a vLLM configuration
  through its own cache (``python -m pfx.integrations.vllm.conform MODEL``), and ``guard``, which
  Python imports at start-up where ``PFX_VLLM`` is set (``pfx-vllm-guard.pth``): it stops a vLLM that
  did not load the plugin.

A running server (vLLM's, llama-server) is checked by ``pfx.verify_server``, each response against a
cold run (``python -m pfx.verify_server --url URL``).

Models and workloads to try them on, for tests, benchmarks and examples, are in ``pfx.fixtures``.
Modules that moved keep their old names until pfx ``_aliases.REMOVED_IN``, in one table
(``pfx.integrations._aliases.ALIASES``): the old name gives the new module and warns
(DeprecationWarning), and ``python -m OLD`` runs the new one.
"""
from . import _aliases

_aliases.install()
