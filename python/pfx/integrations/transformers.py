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

The cache is the one transformers makes for the model's config, but every layer keeps every row: a
sliding-window (or chunked-attention) layer, which transformers caches as a ``DynamicSlidingWindowLayer``
that drops the rows leaving its window, is a ``DynamicLayer`` here, and the model's mask applies the
window over the rows' positions. A layer that shares another's keys (``DummyLayer``) holds no rows of
its own. A model with any other cache layer (a recurrent state, an indexer's keys) is refused when the
engine is made, naming its layers.
"""
from __future__ import annotations

import inspect

import torch

from .._arguments import whole

__all__ = ["TransformersEngine"]


def _cache_keeping_every_row(model, config):
    """The DynamicCache transformers makes for ``config``, its sliding-window layers made full ones.

    A ``DynamicSlidingWindowLayer`` keeps only the last ``sliding_window - 1`` rows: ``forget(p)``
    could not bring back a dropped row (its ``crop`` refuses once the window is full), ``read_rows``
    would read other rows than it names, and a model whose attention takes no window (Llama's, whatever
    its config's ``layer_types``) is handed fewer keys than its mask covers. A ``DynamicLayer`` keeps
    them all, and the mask each model builds from its config (``sliding_window``, over the rows'
    positions from 0) leaves out what the window leaves out, as it does in the model's own forward pass
    of the whole prompt."""
    from transformers import DynamicCache  # the caller's transformers, not this module's name
    try:
        cache = DynamicCache(config=config)
    except TypeError:  # transformers before 4.56 takes no config: every layer keeps every row
        return DynamicCache()
    from transformers import cache_utils
    sliding = getattr(cache_utils, "DynamicSlidingWindowLayer", None)
    kept = (cache_utils.DynamicLayer, getattr(cache_utils, "DummyLayer", None))
    kinds = getattr(config.get_text_config(decoder=True), "layer_types", None) or []
    refused = {}
    for index, layer in enumerate(cache.layers):
        if type(layer) is sliding:
            cache.layers[index] = cache_utils.DynamicLayer()  # every row kept: the mask applies the window
        elif type(layer) not in kept:  # exactly these classes: a subclass keeps more than rows
            kind = kinds[index] if index < len(kinds) else "layer"
            refused.setdefault((kind, type(layer)), []).append(str(index))
    if refused:
        layers = "; ".join(f"layer{'s' * (len(indices) > 1)} {', '.join(indices)} ({kind}, {layer.__name__}) "
                           f"keep{'s' * (len(indices) == 1)} {_what_else(layer)}"
                           for (kind, layer), indices in refused.items())
        raise ValueError(f"TransformersEngine: {type(model).__name__}'s cache cannot be forgotten to a row or read "
                         f"row by row: {layers}")
    return cache


def _what_else(layer: type) -> str:
    """What a cache layer pfx cannot use keeps, instead of (or beside) one key and value row per token."""
    names = [base.__name__ for base in layer.__mro__]
    if "LinearAttentionCacheLayerMixin" in names:
        return "a recurrent state of all the rows before, which cannot be cut back to an earlier row"
    if "DynamicIndexedLayer" in names:
        return "an indexer's keys beside the rows, which read_rows would not compare"
    return "what this engine cannot read (it reads DynamicLayer, DynamicSlidingWindowLayer and DummyLayer)"


def _positive(value, name: str) -> int:
    """value as an int >= 1; TypeError or ValueError naming the argument otherwise."""
    return whole(name, value, 1, who="TransformersEngine: ")


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
        self.cache = _cache_keeping_every_row(model, config)

    def _own_rows(self) -> list:
        """The cache's layers that hold rows: a DummyLayer (keys shared with another layer, or no
        attention) holds none."""
        return [layer for layer in self.cache.layers if getattr(layer, "keys", None) is not None]

    def _rows(self) -> int:
        held = self._own_rows()
        return int(held[0].get_seq_length()) if held else 0

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
        for layer in self._own_rows():
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
