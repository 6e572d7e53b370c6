#!/usr/bin/env python3
"""Writes a small llama-architecture GGUF model with random weights: for trying pfx on llama.cpp
(`pfx replay --engine llama`, `pfx conform --engine llama`, pfx.integrations.llama_cpp), and for
pfx's own tests and benchmarks.

No weights are downloaded: each run writes its model with PyPI's `gguf` package and numpy
(`pip install '.[llama]'`), a few MB. The vocabulary is a valid SentencePiece ("llama") one:
<unk>, <s>, </s>, the 256 byte tokens and a few hundred plain pieces, so that llama.cpp loads it.
The weights are deterministic in --seed. Installed with the package, or run from the source tree:

    python3 -m pfx.integrations.tiny_gguf OUT.gguf [--layers 2] [--embd 128] [--heads 4] [--kv-heads 2]
                       [--ff 256] [--vocab 512] [--ctx 8192] [--type f16|f32] [--seed 1]
    python3 python/pfx/integrations/tiny_gguf.py OUT.gguf ...

--kv-heads below --heads is grouped-query attention; equal to it, plain multi-head attention. --ctx
is the model's trained context (llama.cpp's n_ctx_train).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.stderr.write("tiny_gguf: the Python package gguf is not installed (pip install gguf)\n")
    sys.exit(1)


def write(path: str, *, layers: int = 2, embd: int = 128, heads: int = 4, kv_heads: int = 2, ff: int = 256,
          vocab: int = 512, ctx: int = 8192, dtype: str = "f16", seed: int = 1) -> None:
    if embd % heads != 0 or heads % kv_heads != 0:
        raise ValueError(f"embd {embd} must be a multiple of heads {heads}, and heads of kv_heads {kv_heads}")
    if vocab < 259 + 1:
        raise ValueError(f"vocab {vocab} is too small: 3 special and 256 byte tokens come first")
    head_dim = embd // heads
    rng = np.random.default_rng(seed)
    weight_type = {"f16": np.float16, "f32": np.float32}[dtype]

    def matrix(rows: int, cols: int, scale: float = 0.08) -> np.ndarray:
        # numpy shape (rows, cols) is ggml's ne = [cols, rows]: y = W x with x of cols entries
        return (rng.standard_normal((rows, cols)) * scale).astype(weight_type)

    def norm(n: int) -> np.ndarray:  # norms stay f32, as llama.cpp's converters write them
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = gguf.GGUFWriter(path, "llama")
    w.add_name("pfx tiny random llama")
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(vocab)

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(tokens) < vocab:  # distinct plain pieces: "▁a", "▁b", ..., "▁aa", ...
        piece, n = "", i
        while True:
            piece = letters[n % 26] + piece
            n = n // 26 - 1
            if n < 0:
                break
        tokens.append("\u2581" + piece)
        types.append(gguf.TokenType.NORMAL)
        i += 1
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [0.0] * 256 + [-float(k) for k in range(vocab - 259)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    w.add_tensor("token_embd.weight", matrix(vocab, embd, 1.0))
    for layer in range(layers):
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", norm(embd))
        w.add_tensor(p + "attn_q.weight", matrix(heads * head_dim, embd))
        w.add_tensor(p + "attn_k.weight", matrix(kv_heads * head_dim, embd))
        w.add_tensor(p + "attn_v.weight", matrix(kv_heads * head_dim, embd))
        w.add_tensor(p + "attn_output.weight", matrix(embd, heads * head_dim))
        w.add_tensor(p + "ffn_norm.weight", norm(embd))
        w.add_tensor(p + "ffn_gate.weight", matrix(ff, embd))
        w.add_tensor(p + "ffn_up.weight", matrix(ff, embd))
        w.add_tensor(p + "ffn_down.weight", matrix(embd, ff))
    w.add_tensor("output_norm.weight", norm(embd))
    w.add_tensor("output.weight", matrix(vocab, embd))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ff", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--type", choices=["f16", "f32"], default="f16")
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    write(a.out, layers=a.layers, embd=a.embd, heads=a.heads, kv_heads=a.kv_heads, ff=a.ff, vocab=a.vocab,
          ctx=a.ctx, dtype=a.type, seed=a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
