"""A small causal transformer in PyTorch (CPU), driven through pfx's Python engine protocol
(docs/python.md, "Checking an engine"): the real framework pfx.conform is checked on.

Pre-norm blocks of multi-head attention and a GELU MLP, learned position embeddings, random weights
drawn from a fixed seed. Its KV cache is pfx's KV state: prefill(tokens, start, kv) computes the
chunk's queries, keys and values, writes the keys and values of rows [start, start + n) into kv, and
attends over rows [0, start + n) read back from it, as a serving engine's chunked prefill does.
"""
from __future__ import annotations

import math

import torch


class TorchTransformer:
    """chunk: the prefill chunk a lane uses; the model itself takes chunks of any length."""

    def __init__(self, chunk: int, vocab: int = 64, width: int = 32, heads: int = 2, layers: int = 2,
                 hidden: int = 64, max_positions: int = 1024, seed: int = 1234) -> None:
        self.chunk, self.vocab, self.width, self.layers = chunk, vocab, width, layers
        self.heads, self.head_width = heads, width // heads
        generator = torch.Generator().manual_seed(seed)

        def weight(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return torch.randn(*shape, generator=generator) * scale / math.sqrt(shape[-1])

        self.embed = torch.randn(vocab, width, generator=generator) * 0.5
        self.positions = torch.randn(max_positions, width, generator=generator) * 0.1
        self.blocks = [{
            "wq": weight(width, width), "wk": weight(width, width), "wv": weight(width, width),
            "wo": weight(width, width), "w1": weight(hidden, width), "w2": weight(width, hidden),
        } for _ in range(layers)]
        self.unembed = weight(vocab, width)

    @staticmethod
    def _norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def prefill(self, tokens, start: int, kv):
        """Writes rows [start, start + len(tokens)) of every layer's keys and values into kv (a
        writable float32 buffer of shape (layers, 2, capacity, width)) and returns the last row's
        logits."""
        n = len(tokens)
        end = start + n
        cache = torch.frombuffer(kv, dtype=torch.float32).view(self.layers, 2, -1, self.width)
        with torch.no_grad():
            x = self.embed[torch.tensor(tokens)] + self.positions[start:end]
            # Query i (row start + i) sees rows 0 .. start + i.
            mask = torch.arange(end).unsqueeze(0) > (torch.arange(start, end).unsqueeze(1))
            for layer, w in enumerate(self.blocks):
                a = self._norm(x)
                q, k, v = a @ w["wq"].T, a @ w["wk"].T, a @ w["wv"].T
                cache[layer, 0, start:end] = k
                cache[layer, 1, start:end] = v
                keys = cache[layer, 0, :end].view(end, self.heads, self.head_width).transpose(0, 1)
                values = cache[layer, 1, :end].view(end, self.heads, self.head_width).transpose(0, 1)
                queries = q.view(n, self.heads, self.head_width).transpose(0, 1)
                scores = queries @ keys.transpose(1, 2) / math.sqrt(self.head_width)
                scores = scores.masked_fill(mask, float("-inf"))
                attended = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).reshape(n, self.width)
                x = x + attended @ w["wo"].T
                x = x + torch.nn.functional.gelu(self._norm(x) @ w["w1"].T) @ w["w2"].T
            logits = self._norm(x[-1]) @ self.unembed.T
        return logits.tolist()
