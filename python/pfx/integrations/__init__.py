"""Adapters that let pfx drive engines people run, each over the engine's own KV cache (docs/python.md,
"Engines that own their cache"; docs/engines.md). Each adapter is a module of its own, imported on
demand, so that ``import pfx`` needs none of the frameworks:

- ``pfx.integrations.transformers``: ``TransformersEngine``, a Hugging Face transformers causal LM
  and its ``DynamicCache``, for ``pfx.Lane``, ``pfx.conform`` and ``pfx.verify``.
- ``pfx.integrations.llama_cpp``: ``LlamaCppEngine``, a GGUF model on one llama.cpp context over
  llama-cpp-python's low-level API (``scripts/llama.sh --python`` installs it); and ``enable(llm)``,
  pfx's rule in charge of the prefix reuse of llama-cpp-python's own ``Llama``
  (``pfx.integrations.llama_cpp_rule``).
- ``pfx.integrations.llama_cpp_server``: llama-cpp-python's OpenAI-compatible server with the rule on
  for every model it loads (``python -m pfx.integrations.llama_cpp_server --model M``).
- ``pfx.integrations.vllm``: the vLLM plugin (``PFX_VLLM=1``, or ``enable()``), pfx's rule in charge
  of vLLM's prefix cache.
- ``pfx.integrations.vllm_conform``: the conformance check of a vLLM configuration through its own
  cache (``python -m pfx.integrations.vllm_conform MODEL``).
- ``pfx.integrations.vllm_verify``: the check of the vLLM a user serves, a running OpenAI-compatible
  server or a ``vllm.LLM``, each response against a cold run
  (``python -m pfx.integrations.vllm_verify --url URL``).

``pfx.integrations.vllm_guard`` is imported by Python itself, at start-up where ``PFX_VLLM`` is set
(``pfx-vllm-guard.pth``): it stops a vLLM that did not load the plugin.

Models and workloads to try them on, for tests, benchmarks and examples, are in ``pfx.fixtures``.
Three of them were here before: ``tiny_gguf``, ``tiny_llama`` and ``workloads`` under this package
are their old names, aliases that give the same objects and warn (DeprecationWarning).
"""
