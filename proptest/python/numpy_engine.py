"""The numpy engine of docs/python.md ("Checking an engine"), verbatim: a one-layer causal attention
model whose prefill writes its rows into pfx's KV state."""
import numpy as np


class NumpyEngine:
    def __init__(self, chunk, vocab=32, width=8, seed=5):
        self.chunk, self.vocab, self.layers, self.width = chunk, vocab, 1, width
        weights = np.random.default_rng(seed)
        self.embed = weights.standard_normal((vocab, width), dtype=np.float32)
        self.wk, self.wv, self.wq = (weights.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)
                                     for _ in range(3))
        self.unembed = weights.standard_normal((vocab, width), dtype=np.float32)

    def prefill(self, tokens, start, kv):
        cache = np.asarray(kv)                 # (layers, 2, capacity, width), float32, pfx's rows
        end = start + len(tokens)
        x = self.embed[tokens] + np.float32(0.01) * np.arange(start, end, dtype=np.float32)[:, None]
        cache[0, 0, start:end] = x @ self.wk   # this chunk's keys and values
        cache[0, 1, start:end] = x @ self.wv
        scores = (x @ self.wq) @ cache[0, 0, :end].T
        scores[np.arange(end)[None, :] > np.arange(start, end)[:, None]] = -np.inf  # causal
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        attended = (weights / weights.sum(axis=1, keepdims=True)) @ cache[0, 1, :end]
        return (attended[-1] + x[-1]) @ self.unembed.T   # the last row's logits (vocab float32)
