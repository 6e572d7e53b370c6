"""pfx.integrations.llama_cpp.engine: an engine over llama-cpp-python's low-level API for pfx.Lane,
pfx.conform and pfx.verify (docs/python.md, docs/engines.md).

The engine owns its cache: one llama_context whose memory, for sequence 0, holds the rows. A prefill
call is one llama_decode of the chunk's tokens at their positions (llama.cpp splits it into ubatches
of n_ubatch rows); a decode step is one llama_decode of one token; forget(p) is
llama_memory_seq_rm(memory, 0, p, -1); read_rows(start, end) returns the KV cache's own bytes of
those positions (f16 or f32), parsed from llama_state_seq_get_data by pfx::llama's own parse
(compiled into pfx's module), for comparison as bytes; read_each_row(start, end) the same rows
apart, from one read.

llama-cpp-python must match the llama.cpp it loads: `scripts/llama.sh --python` installs the Python
package of the same version as the llama.cpp it builds, without building llama.cpp a second time, and
links that build's libraries where the package looks for them. This module changes no environment
variable: `import llama_cpp` works on its own.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional

from ... import _native
from ..._arguments import whole
from ._library import load

__all__ = ["LlamaCppEngine", "each_row_of_sequence_state", "rows_of_sequence_state"]


_initialized = False
_LOG = None  # llama.cpp's log callback, kept alive for as long as llama.cpp may call it
_verbose = False  # whether llama.cpp's log lines go to standard error (an engine made with verbose=True)
_errors: list = []  # llama.cpp's error lines since the last engine began loading: told in pfx's error


def _log(level, text, user_data):  # llama.cpp's log callback
    line = text.decode(errors="replace")
    if _verbose:
        import sys

        sys.stderr.write(line)
    elif level == 4 and len(_errors) < 20:  # GGML_LOG_LEVEL_ERROR, kept for the error pfx raises
        _errors.append(line.strip())


def _integer(value, name: str, least: int = 1) -> int:
    """value as an int >= least; TypeError or ValueError naming the argument otherwise."""
    return whole(name, value, least, who="LlamaCppEngine: ")


def rows_of_sequence_state(state: bytes, start: int, end: int) -> bytes:
    """Rows [start, end) of sequence 0 in the bytes of llama_state_seq_get_data: for each layer its
    key rows, then for each layer its value rows, in the cache's own element type and in position
    order (a transposed value cache is gathered back into rows). pfx::llama's own parse
    (integrations/llama, compiled into pfx's module). Raises ValueError on a format it does not know."""
    return _native._llama_rows_of_sequence_state(state, start, end)


def each_row_of_sequence_state(state: bytes, start: int, end: int) -> list[bytes]:
    """Each row of [start, end) apart, from one parse: element i is
    rows_of_sequence_state(state, start + i, start + i + 1)."""
    return _native._llama_each_row_of_sequence_state(state, start, end)


class LlamaCppEngine:
    """A llama.cpp model on one context, for pfx's engine protocol (an engine that owns its cache).

    LlamaCppEngine(model_path, chunk, ubatch=None, threads=None, flash_attn="auto", kv_type="f16",
                   capacity=None, verbose=False)

    chunk is n_batch, the tokens of one prefill call and the rule's chunk; ubatch is n_ubatch (at
    most chunk; default: chunk); flash_attn is "on", "off" or "auto"; kv_type "f16" or "f32";
    capacity the rows of the context: the model's trained context (n_ctx_train), or fewer when given
    (a position past it is refused). verbose sends llama.cpp's own log to standard error; without it
    llama.cpp's error lines are told in the error pfx raises. A missing or unreadable model raises
    FileNotFoundError / OSError naming the file; a bad argument TypeError / ValueError naming it."""

    def __init__(self, model_path, chunk: int, ubatch: Optional[int] = None, threads: Optional[int] = None,
                 flash_attn: str = "auto", kv_type: str = "f16", capacity: Optional[int] = None,
                 verbose: bool = False) -> None:
        global _initialized, _LOG, _verbose
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError(f"LlamaCppEngine: model_path must be a path (str or os.PathLike), "
                            f"got {type(model_path).__name__}")
        model_path = os.fspath(model_path)
        chunk = _integer(chunk, "chunk")
        ubatch = chunk if ubatch is None else _integer(ubatch, "ubatch")
        if ubatch > chunk:
            raise ValueError(f"LlamaCppEngine: ubatch {ubatch} must be 1 to the chunk {chunk} "
                             "(llama.cpp's n_ubatch <= n_batch)")
        threads = 1 if threads is None else _integer(threads, "threads")  # as pfx::llama: ggml's barriers spin
        if capacity is not None:
            capacity = _integer(capacity, "capacity")
        if flash_attn not in ("on", "off", "auto"):
            raise ValueError(f"LlamaCppEngine: flash_attn {flash_attn!r}: expected 'on', 'off' or 'auto'")
        if kv_type not in ("f16", "f32"):
            raise ValueError(f"LlamaCppEngine: kv_type {kv_type!r}: expected 'f16' or 'f32'")
        if os.path.isdir(model_path):
            raise IsADirectoryError(f"cannot read the model {model_path}: it is a directory")
        with open(model_path, "rb"):  # FileNotFoundError / PermissionError name the file
            pass
        ll = self._ll = load("LlamaCppEngine")
        if not _initialized:
            _LOG = ll.llama_log_callback(_log)
            ll.llama_log_set(_LOG, ctypes.c_void_p())
            ll.llama_backend_init()
            _initialized = True
        _verbose = bool(verbose)
        _errors.clear()
        self.chunk = chunk
        self.ubatch = ubatch
        self.threads = threads
        model_params = ll.llama_model_default_params()
        model_params.n_gpu_layers = 0
        self._model = ll.llama_model_load_from_file(model_path.encode(), model_params)
        if not self._model:
            said = f" (llama.cpp: {'; '.join(_errors)})" if _errors else ""
            raise OSError(f"cannot load the model {model_path}: llama.cpp does not read it as a GGUF model{said}")
        self.vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self._model))
        # The model's trained context bounds every position; a capacity asked for may only lower it.
        self.trained_context = ll.llama_model_n_ctx_train(self._model)
        self.capacity = self.trained_context if capacity is None else min(capacity, self.trained_context)
        params = ll.llama_context_default_params()
        params.n_ctx = self.capacity
        params.n_batch = chunk
        params.n_ubatch = ubatch
        params.n_seq_max = 1
        params.n_threads = self.threads
        params.n_threads_batch = self.threads
        params.type_k = params.type_v = 1 if kv_type == "f16" else 0  # GGML_TYPE_F16, GGML_TYPE_F32
        params.no_perf = True
        flash = {"on": 1, "off": 0, "auto": -1}[flash_attn]
        if hasattr(params, "flash_attn_type"):
            params.flash_attn_type = flash
        elif flash >= 0:
            params.flash_attn = bool(flash)
        self._context = ll.llama_init_from_model(self._model, params)
        if not self._context:
            ll.llama_model_free(self._model)
            raise RuntimeError(f"llama.cpp could not make a context of {self.capacity} rows")
        self._batch = ll.llama_batch_init(chunk, 0, 1)

    def __del__(self) -> None:
        ll = getattr(self, "_ll", None)
        if ll is None:
            return
        if getattr(self, "_batch", None) is not None:
            ll.llama_batch_free(self._batch)
        if getattr(self, "_context", None):
            ll.llama_free(self._context)
        if getattr(self, "_model", None):
            ll.llama_model_free(self._model)

    def _run(self, tokens, start: int):
        import numpy as np

        end = start + len(tokens)
        if not 0 <= start < end <= self.capacity:
            raise ValueError(f"LlamaCppEngine: positions {start}..{end - 1} are past the context of {self.capacity} "
                             f"rows (the model's trained context is {self.trained_context})")
        batch = self._batch
        for i, t in enumerate(tokens):
            if not 0 <= int(t) < self.vocab:
                raise ValueError(f"token {t} is not below the vocabulary {self.vocab}")
            batch.token[i] = int(t)
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if i + 1 == len(tokens) else 0
        batch.n_tokens = len(tokens)
        status = self._ll.llama_decode(self._context, batch)
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}" + (" (no room in the KV cache)" if status == 1 else ""))
        last = self._ll.llama_get_logits_ith(self._context, -1)
        return np.ctypeslib.as_array(last, shape=(self.vocab,)).astype(np.float32, copy=True)

    def prefill(self, tokens, start: int):
        """One llama_decode of `tokens` at positions [start, start + len): the last row's logits."""
        tokens = list(tokens)
        if not 1 <= len(tokens) <= self.chunk:
            raise ValueError(f"prefill of {len(tokens)} tokens: expected 1 to the chunk {self.chunk}")
        return self._run(tokens, start)

    def decode(self, token: int, position: int):
        return self._run([token], position)

    def forget(self, position: int) -> None:
        if not self._ll.llama_memory_seq_rm(self._ll.llama_get_memory(self._context), 0, position, -1):
            raise RuntimeError(f"llama.cpp refused to forget rows from {position}")

    def _sequence_state(self) -> bytes:
        ll = self._ll
        ll.llama_synchronize(self._context)
        size = ll.llama_state_seq_get_size(self._context, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = ll.llama_state_seq_get_data(self._context, buffer, size, 0)
        return bytes(buffer)[:written]

    def read_rows(self, start: int, end: int) -> bytes:
        return rows_of_sequence_state(self._sequence_state(), start, end)

    def read_each_row(self, start: int, end: int) -> list[bytes]:
        """Each row apart from one serialization: a read per row would serialize the whole sequence
        once a row."""
        return each_row_of_sequence_state(self._sequence_state(), start, end)

