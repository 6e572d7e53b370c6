"""A Hugging Face transformers causal LM as an engine that owns its cache (docs/python.md, "Engines that
own their cache"): ``pfx.Lane``, ``pfx.conform`` and ``pfx.verify`` drive it through its own
``DynamicCache``.

    from pfx.integrations.transformers import TransformersEngine
    engine = TransformersEngine(model, chunk=16)
    lane = pfx.Lane(engine, keep_min=16, capacity=4096)
    response = lane.serve(prompt_ids, max_new_tokens=32)

Every prefill of a chunk is one forward pass of the chunk's tokens at their positions over the rows
before them (``model(input_ids, cache=cache, position_ids=..., cache_position=...)``); a
decode is a forward pass of one token; ``forget(p)`` crops the cache to its first ``p`` rows;
``read_rows`` returns the cache's key and value bytes of those rows, in the cache's own dtype. One
engine holds one cache, for one sequence: it serves one lane (or one check) at a time.
"""
from __future__ import annotations

import inspect

import torch

__all__ = ["TransformersEngine"]


def _positive(value, name: str) -> int:
    """value as an int >= 1; TypeError or ValueError naming the argument otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"TransformersEngine: {name} must be an int >= 1, got {type(value).__name__} ({value!r})")
    if value < 1:
        raise ValueError(f"TransformersEngine: {name} must be an int >= 1, got {value}")
    return value


class TransformersEngine:
    """``model``: a transformers causal LM (``model(input_ids, ...).logits`` of shape
    ``(1, tokens, vocab)``), in eval mode. ``chunk``: the tokens of one prefill call, the grid the lane
    resumes on (THM-1). ``vocab`` defaults to ``model.config.vocab_size``; ``capacity``, the rows the
    cache may hold, to ``model.config.max_position_embeddings`` when the config has it."""

    def __init__(self, model, chunk: int, *, vocab: int | None = None, capacity: int | None = None):
        chunk = _positive(chunk, "chunk")
        config = getattr(model, "config", None)
        if config is None or not callable(model) or not hasattr(model, "parameters"):
            raise TypeError(f"TransformersEngine: model must be a transformers causal LM (a PreTrainedModel such as "
                            f"LlamaForCausalLM), got {type(model).__name__}")
        heads = getattr(model, "get_output_embeddings", None)
        if heads is not None and heads() is None:  # a base model: its output is hidden states, not logits
            raise ValueError(f"TransformersEngine: {type(model).__name__} has no language-model head, so it returns no "
                             "logits: pass its causal LM (LlamaForCausalLM, AutoModelForCausalLM, ...)")
        from transformers import DynamicCache  # the caller's transformers, not this module's name
        self.model = model
        self.chunk = chunk
        if vocab is None and getattr(config, "vocab_size", None) is None:
            raise ValueError(f"TransformersEngine: {type(config).__name__} has no vocab_size: pass vocab=")
        self.vocab = _positive(vocab if vocab is not None else config.vocab_size, "vocab")
        limit = capacity if capacity is not None else getattr(config, "max_position_embeddings", None)
        self.capacity = _positive(limit, "capacity") if limit is not None else None
        self.device = next(model.parameters()).device
        # transformers 5.x names the argument `cache` (`past_key_values` is deprecated there); 4.x knows
        # only `past_key_values`.
        forward = inspect.signature(model.forward).parameters
        self._cache_argument = "cache" if "cache" in forward else "past_key_values"
        try:
            self.cache = DynamicCache(config=config)
        except TypeError:  # transformers before 4.56 takes no config
            self.cache = DynamicCache()

    def _rows(self) -> int:
        return int(self.cache.get_seq_length())

    def _forward(self, tokens, start: int):
        held = self._rows()
        if held != start:
            # The lane forgets the rows past a resume before it writes again: a cache that does not
            # hold exactly rows [0, start) here means a forget was missed.
            raise ValueError(f"TransformersEngine: the cache holds {held} rows, but the call writes from row {start}")
        n = len(tokens)
        positions = torch.arange(start, start + n, device=self.device)
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([list(tokens)], dtype=torch.long, device=self.device),
                             use_cache=True, position_ids=positions.unsqueeze(0), cache_position=positions,
                             **{self._cache_argument: self.cache})
        return out.logits[0, -1].to(torch.float32).contiguous().cpu().numpy()

    def prefill(self, tokens, start: int):
        """Writes rows [start, start + len(tokens)) from rows [0, start); returns the last row's logits."""
        return self._forward(tokens, start)

    def decode(self, token: int, position: int):
        """Writes row ``position`` for ``token``; returns its logits."""
        return self._forward([token], position)

    def forget(self, position: int) -> None:
        """Drops the rows at or past ``position``."""
        held = self._rows()
        if position >= held:
            return
        if position == 0:
            self.cache.reset()
        else:
            self.cache.crop(position - held)  # a negative count removes that many rows from the end

    def read_rows(self, start: int, end: int) -> bytes:
        """The keys and values of rows [start, end), row by row (each row: every layer's keys, then its
        values), as the bytes of the cache's own dtype."""
        if not 0 <= start <= end <= self._rows():
            raise ValueError(f"TransformersEngine.read_rows: rows [{start}, {end}) are not all in the cache "
                             f"({self._rows()} rows)")
        if start == end:
            return b""
        parts = []
        for layer in self.cache.layers:
            for plane in (layer.keys, layer.values):
                # (batch 1, heads, rows, dim) -> (rows, heads * dim)
                rows = plane[0, :, start:end, :].transpose(0, 1)
                parts.append(rows.reshape(end - start, -1))
        table = torch.cat(parts, dim=1).contiguous().cpu()
        return table.view(torch.uint8).numpy().tobytes()

    def read_each_row(self, start: int, end: int) -> list[bytes]:
        """Each row of [start, end) apart, from one read_rows: its rows are row by row, of one size."""
        table = self.read_rows(start, end)
        size = len(table) // (end - start) if end > start else 0
        return [table[i * size:(i + 1) * size] for i in range(end - start)]
