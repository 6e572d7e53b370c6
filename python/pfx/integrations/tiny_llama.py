"""A small Llama with random weights, written with transformers (no download), for trying pfx's
integrations where no model is at hand: the vLLM plugin's tests, its conformance check and its
benchmark (docs/engines.md, "vLLM"). Not a model to serve: its answers are noise, deterministic noise.

    python -m pfx.integrations.tiny_llama DIRECTORY [--seed N] [--dtype float32|bfloat16]
"""
from __future__ import annotations

import argparse

VOCAB = 512


def write_tiny_llama(directory: str, seed: int = 0, dtype: str = "float32", layers: int = 2,
                     max_positions: int = 4096) -> str:
    """Writes a Llama of `layers` layers (hidden 128, 4 query heads of 32 over 2 KV heads, vocabulary
    512) with weights drawn from `seed`, in `dtype`, to `directory` (transformers' save_pretrained),
    and returns the directory. A head of 32 is the smallest vLLM's CPU attention takes."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                      head_dim=32, max_position_embeddings=max_positions,
                                      torch_dtype=dtype)
    model = transformers.LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(directory)
    return directory


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pfx.integrations.tiny_llama", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    arguments = parser.parse_args(argv)
    print(write_tiny_llama(arguments.directory, arguments.seed, arguments.dtype))


if __name__ == "__main__":
    main()
