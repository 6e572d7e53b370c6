"""Adapters that let pfx drive engines people run, each over the engine's own KV cache (docs/python.md,
"Engines that own their cache"). Each adapter is a module of its own, imported on demand, so that
``import pfx`` needs none of the frameworks:

- ``pfx.integrations.transformers.TransformersEngine``: a Hugging Face transformers causal LM and its
  ``DynamicCache``.
- ``pfx.integrations.llama_cpp.LlamaCppEngine``: a GGUF model on one llama.cpp context, over
  llama-cpp-python's low-level API (``scripts/llama.sh --python`` installs it).
- ``pfx.integrations.tiny_gguf``: writes a small llama GGUF model with random weights to try them on
  (``python3 -m pfx.integrations.tiny_gguf model.gguf``).
"""
