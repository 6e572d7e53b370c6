"""pfx's rule in charge of llama-cpp-python's own ``Llama``: ``enable(llm)`` and ``disable(llm)``
(re-exported by ``pfx.integrations.llama_cpp``; docs/engines.md, "llama-cpp-python's Llama").

``Llama.generate`` keeps the longest common prefix of the tokens its context holds and the new prompt,
rows that decode wrote included, at any offset, and removes the rest: a resumed response then differs
from a cold one (docs/engines.md, "llama.cpp"). With the rule on, how much of each prompt ``llm`` takes
from its KV cache is pfx's decision (``pfx.Machine``, the core's rule: strict prefix, never past the
last prompt's end, at least one token left, aligned down to the chunk, the prefill step where it
applies, keep_min), and nothing else changes: generate still evaluates the prompt from that offset
on, samples, streams and stops as it does. The record is what prefill wrote: the last prompt,
canonical_end at its end, or one row short of it where the prefill step applies and the prompt's
last ubatch was that row alone (a longer prompt computes it in a longer ubatch: docs/spec.md, "THM-1
with a one-token step").

The grid and the step: llama-cpp-python evaluates the rest of a prompt in calls of ``n_batch`` tokens
from the offset on, and llama.cpp splits each call into ubatches of ``n_ubatch`` rows from the call's
start. A resume at a multiple of ``n_ubatch`` keeps every ubatch where a cold run has it when
``n_batch`` is a multiple of ``n_ubatch``; otherwise only one at a multiple of ``n_batch`` does. That
grid (``exact_grid``) is the default chunk with flash attention on, whose tiled path makes a row's
bits depend on the size of its ubatch, and wherever ``n_ubatch`` does not divide ``n_batch``. With
flash attention off (llama-cpp-python's default) only a ubatch of one row computes a row otherwise
(``pfx conform --engine llama --prefill-step``, docs/engines.md), and with ``n_batch`` a multiple of
``n_ubatch`` only a prefill's last ubatch can be short: llama.cpp is then the engine of INV-12 with a
prefill step of ``n_ubatch``, and the default is chunk 1 with ``prefill_step = n_ubatch``: the core
lowers an offset only where the resumed prefill's last ubatch would be one row and the cold run's
not, or the other way round. A chunk given explicitly must be on the grid and is taken as it is,
with no prefill step.

The rule is put on one ``Llama`` object, not its class: six of its methods are shadowed on the
instance (generate, eval, reset, save_state, load_state, embed), so that the record follows every way
the context changes: a prefill (committed once evaluated), a failed or interrupted one (aborted: the
rows before the offset stay), a reset, an embedding (which clears the context), a state saved and
loaded (the record travels with the state, so ``LlamaRAMCache`` and ``LlamaDiskCache`` stay exact; a
state from elsewhere is loaded with an empty record), and rows evaluated or ids changed by hand (the
record shrinks to what still holds). Other ``Llama`` objects stay stock.
"""
from __future__ import annotations

import collections
import functools
import inspect
import logging
import os
from typing import Optional

from ... import _native
from ..._arguments import whole
from ..._refusals import UNTESTED_VERSION, refused
from ._library import TESTED_VERSIONS, load, untested

__all__ = ["LlamaRule", "TESTED_VERSIONS", "decisions", "disable", "enable", "exact_grid"]

SHADOWED = ("generate", "eval", "reset", "save_state", "load_state", "embed")
RULE_ATTRIBUTE = "_pfx_rule"
STATE_ATTRIBUTE = "pfx_record"  # on a LlamaState: (fingerprint, ids, canonical_end), pickled with it

# What decides the bits of a row, of what Llama.__getstate__ lists: a saved record is taken back only
# into a context where all of these are the same (and the model file is the same file).
ROW_SETTINGS = ("model_path", "n_gpu_layers", "split_mode", "main_gpu", "tensor_split", "kv_overrides", "n_ctx",
                "n_batch", "n_ubatch", "rope_scaling_type", "pooling_type", "attention_type", "rope_freq_base",
                "rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow",
                "yarn_orig_ctx", "logits_all", "embedding", "offload_kqv", "flash_attn", "op_offload", "swa_full",
                "lora_base", "lora_scale", "lora_path", "type_k", "type_v")

_logger = logging.getLogger("pfx.llama_cpp")


def exact_grid(n_batch: int, n_ubatch: int) -> int:
    """The finest grid on which a resume computes every ubatch where a cold run does: n_ubatch when
    it divides n_batch (each call then splits on the n_ubatch grid), n_batch otherwise (the ubatch
    grid restarts at each call). pfx/llama/policy.hpp's, which llama-server's --pfx takes too."""
    return _native._llama_exact_grid(n_batch, n_ubatch)


class LlamaRule:
    """pfx's rule on one ``Llama`` (what ``enable`` returns): ``chunk``, ``keep_min``, ``prefill_step``
    (0: none), ``grid`` (``exact_grid(n_batch, n_ubatch)``), ``machine`` (the ``pfx.Machine`` holding the record),
    ``last`` (the last ``pfx.Decision``) and ``decisions`` (a Counter: the decisions by reason name,
    plus "prompts", "prompt_tokens", "tokens_held": the common prefix with what the context held,
    rows decode wrote included, and "tokens_reused": pfx's offsets)."""

    def __init__(self, llm, chunk: int, keep_min: int, prefill_step: int, grid: int, n_batch: int,
                 n_ubatch: int) -> None:
        self.llm = llm
        self.chunk = chunk
        self.keep_min = keep_min
        self.prefill_step = prefill_step
        self.grid = grid
        self.n_batch = n_batch
        self.n_ubatch = n_ubatch
        self.machine = _native.Machine(_native.Config(enabled=True, keep_min=keep_min, chunk=chunk,
                                                      prefill_step=prefill_step))
        self.decisions: collections.Counter = collections.Counter()
        self.last: Optional[_native.Decision] = None
        self.fingerprint = _fingerprint(llm)
        self.originals = {name: getattr(llm, name) for name in SHADOWED}  # the bound stock methods
        self._prefilling: Optional[list] = None  # the prompt whose prefill generate is evaluating

    def __repr__(self) -> str:
        return (f"LlamaRule(chunk={self.chunk}, keep_min={self.keep_min}, prefill_step={self.prefill_step}, "
                f"grid={self.grid} (n_batch {self.n_batch}, n_ubatch {self.n_ubatch}), "
                f"canonical_end={self.machine.canonical_end})")

    # The record and the context: each event is pfx/llama/record.hpp's, which llama-server's slots
    # keep their records with too; here only when each happens.

    def _writing(self) -> bool:
        return self.machine.phase == _native.Phase.writing

    def _held(self):
        """The tokens the context says its rows hold: Llama's input_ids below n_tokens."""
        return self.llm.input_ids[:self.llm.n_tokens]

    def _settle(self) -> None:
        """Aborts a write that never committed, and shrinks the record to the rows the context still
        holds as recorded (someone may have moved n_tokens or changed input_ids)."""
        _native._llama_settle(self.machine, self._held())

    def _forget_from(self, row: int) -> None:
        """Rows from `row` on are about to be written by something other than a prefill on the grid."""
        _native._llama_forget_from(self.machine, row)

    # The shadowed methods.

    def generate(self, tokens, *args, **kwargs):
        if not _GENERATE.bind(self.llm, tokens, *args, **kwargs).arguments.get("reset", True):
            raise refused("Llama.generate(reset=False) evaluates the prompt after whatever the context holds, "
                             "which pfx's rule cannot vouch for; call it with reset=True (the default), or "
                             "pfx.integrations.llama_cpp.disable(llm) first")
        return self._generate(list(tokens), args, kwargs)

    def _generate(self, prompt: list, args, kwargs):
        llm, machine = self.llm, self.machine
        _refuse_multimodal(llm)
        tokens_held = self._held()
        held = _native.common_prefix(tokens_held, prompt)
        # A prefill that never reached eval's end (a generator made but dropped) is aborted first.
        decision = _native._llama_begin(machine, tokens_held, prompt)
        # generate keeps the common prefix of what it holds and the prompt: holding exactly the rows
        # below the offset, whose ids are the prompt's (INV-1), it keeps those and evaluates the rest.
        llm.n_tokens = decision.offset
        self.last = decision
        self.decisions.update({decision.reason.name: 1, "prompts": 1, "prompt_tokens": len(prompt),
                               "tokens_held": held, "tokens_reused": decision.offset})
        _logger.debug("pfx: prompt of %d tokens: the context held %d of it, the rule allows %d (%s, bound %s)",
                      len(prompt), held, decision.offset, decision.reason.name, decision.bound.name)
        self._prefilling = prompt
        try:
            return (yield from self.originals["generate"](prompt, *args, **kwargs))
        except BaseException:
            if self._prefilling is not None:  # the prefill failed: rows below the offset were not touched
                self._prefilling = None
                _native._llama_abort(machine)
            raise

    def eval(self, tokens) -> None:
        prompt = self._prefilling
        if prompt is None:
            self._forget_from(self.llm.n_tokens)  # eval first removes every row from n_tokens on
        self.originals["eval"](tokens)
        if prompt is not None:
            self._prefilling = None
            if self.llm.n_tokens == len(prompt):
                # Rows decode writes next lie past canonical_end, and so does a last prompt row that a
                # one-row ubatch computed under the prefill step (INV-12: a longer prompt computes it
                # in a longer ubatch).
                _native._llama_commit(self.machine)
            else:
                _native._llama_abort(self.machine)

    def reset(self) -> None:
        self.originals["reset"]()
        # generate resets the context itself before a cold prefill: the record is already empty then,
        # and clearing it would taint the write (nothing committed).
        if not (self._writing() and self.machine.begin_offset == 0):
            self.machine.clear()

    def embed(self, *args, **kwargs):
        self._forget_from(0)  # embed clears the context first, and resets it only when it succeeds
        return self.originals["embed"](*args, **kwargs)

    def save_state(self):
        state = self.originals["save_state"]()
        if not self._writing():
            self._settle()
            machine = self.machine
            setattr(state, STATE_ATTRIBUTE, (self.fingerprint, list(machine.ids[:machine.canonical_end]),
                                             machine.canonical_end))
        return state

    def load_state(self, state) -> None:
        if self._writing():
            self._prefilling = None
            _native._llama_abort(self.machine)
        self._forget_from(0)  # a failed load leaves the context undefined
        self.originals["load_state"](state)
        saved = getattr(state, STATE_ATTRIBUTE, None)
        if saved is not None and saved[0] == self.fingerprint:
            _, ids, canonical_end = saved
            self.machine.record(ids, canonical_end)
            self._settle()


_GENERATE = None  # the signature of Llama.generate, read when the rule is first enabled


def enable(llm, chunk: Optional[int] = None, keep_min: int = 0) -> LlamaRule:
    """Puts pfx's rule in charge of how much of each prompt ``llm`` (a ``llama_cpp.Llama``) takes from
    its KV cache, from now on, and returns the ``LlamaRule``. ``chunk`` None is what llama.cpp is
    exact on with the context's settings: with flash attention off and ``n_ubatch`` dividing
    ``n_batch``, chunk 1 with ``prefill_step = n_ubatch`` (only a ubatch of one row computes a row
    otherwise, and only a prefill's last ubatch can be short); else the grid ``exact_grid(n_batch,
    n_ubatch)`` with no prefill step (flash attention on or auto: a row's bits depend on its ubatch's
    size; ``n_ubatch`` not dividing ``n_batch``: each call's last ubatch may be one row, anywhere). A
    chunk given must be a multiple of the grid and is taken with no prefill step. ``keep_min`` is the
    fewest tokens worth reusing.

    Raises TypeError or ValueError naming a bad argument, RuntimeError for a second enable on the same
    ``llm``, and ``pfx.Refused`` (a RuntimeError and a ValueError) for what pfx cannot vouch for: a
    llama-cpp-python version it was not tested with (``TESTED_VERSIONS``; ``.refusal`` "untested
    version"), a Llama subclass that overrides a method the rule shadows, a recurrent, hybrid or
    sliding-window model, a multimodal chat handler, layers offloaded to a GPU (``.refusal``
    "configuration")."""
    global _GENERATE
    llama_cpp = load("pfx.integrations.llama_cpp.enable")
    if not isinstance(llm, llama_cpp.Llama):
        raise TypeError(f"enable: llm must be a llama_cpp.Llama, got {type(llm).__name__}")
    if RULE_ATTRIBUTE in vars(llm):
        raise RuntimeError(f"enable: pfx's rule is already on for this Llama ({vars(llm)[RULE_ATTRIBUTE]!r}); "
                           "call pfx.integrations.llama_cpp.disable(llm) first to change its settings")
    whole("keep_min", keep_min, 0, who="enable: ")
    whole("chunk", chunk, None, none="the exact grid", who="enable: ")  # its range: on the grid, below
    _refuse_unvouched(llama_cpp, llm)
    n_batch = llm.n_batch
    n_ubatch = llama_cpp.llama_n_ubatch(llm.ctx)
    grid = exact_grid(n_batch, n_ubatch)
    # The chunk and prefill step llama-server's --pfx takes too (pfx/llama/policy.hpp): flash attention
    # asked off; llama-cpp-python's Llama asks for it on or off, never auto.
    flash_attention_off = llm.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    try:
        chunk, prefill_step = _native._llama_resolve(n_batch, n_ubatch, flash_attention_off=flash_attention_off,
                                                     chunk=chunk)
    except ValueError as error:
        raise ValueError(f"enable: {error}" + (", or None" if chunk is not None else "")) from None
    if _GENERATE is None:
        _GENERATE = inspect.signature(llama_cpp.Llama.generate)
    rule = LlamaRule(llm, chunk, keep_min, prefill_step, grid, n_batch, n_ubatch)
    for name in SHADOWED:
        setattr(llm, name, _shadow(getattr(rule, name), rule.originals[name]))
    setattr(llm, RULE_ATTRIBUTE, rule)
    return rule


def _shadow(method, original):
    """`method` under the name and documentation of the stock method it stands for."""
    @functools.wraps(original)
    def shadow(*args, **kwargs):
        return method(*args, **kwargs)
    return shadow


def disable(llm) -> None:
    """Gives ``llm`` its stock reuse back (the record is dropped). Raises ValueError when pfx's rule is
    not on for it."""
    rule = vars(llm).get(RULE_ATTRIBUTE) if hasattr(llm, "__dict__") else None
    if rule is None:
        raise ValueError(f"disable: pfx's rule is not on for this {type(llm).__name__}")
    for name in SHADOWED:
        delattr(llm, name)
    delattr(llm, RULE_ATTRIBUTE)


def decisions(llm) -> collections.Counter:
    """A copy of the counts of ``llm``'s rule (``LlamaRule.decisions``). Raises ValueError when pfx's
    rule is not on for it."""
    rule = vars(llm).get(RULE_ATTRIBUTE) if hasattr(llm, "__dict__") else None
    if rule is None:
        raise ValueError(f"decisions: pfx's rule is not on for this {type(llm).__name__}")
    return collections.Counter(rule.decisions)


def _refuse_unvouched(llama_cpp, llm) -> None:
    """pfx.Refused naming the first thing about `llm` that pfx's rule was not made or tested for."""
    reason = untested(llama_cpp)
    if reason:
        raise refused(f"enable: {reason}: it does not take charge of a generate it does not know. Install a "
                      "tested version (scripts/llama.sh --python), or serve without pfx", UNTESTED_VERSION)
    for name in SHADOWED:
        if getattr(type(llm), name) is not getattr(llama_cpp.Llama, name):
            raise refused(f"enable: {type(llm).__name__} overrides Llama.{name}, which pfx's rule takes charge "
                          "of; enable it on a llama_cpp.Llama whose methods are llama-cpp-python's")
        if name in vars(llm):
            raise refused(f"enable: this Llama's {name} is already replaced on the object itself; pfx's rule "
                          "takes charge only of llama-cpp-python's own")
    # What llama-server's --pfx refuses too, in the same words (pfx/llama/policy.hpp).
    cause = _native._llama_unvouched(
        recurrent_or_hybrid=bool(llm._is_recurrent or llm._is_hybrid), n_swa=llama_cpp.llama_model_n_swa(llm.model),
        multimodal=_multimodal(llm),
        gpu_layers=llm.model_params.n_gpu_layers if llama_cpp.llama_supports_gpu_offload() else 0)
    if cause:
        raise refused(f"enable: {cause}, which pfx's rule cannot vouch for; serve it without pfx's rule")


def _multimodal(llm) -> str:
    """What writes multimodal rows into `llm`'s context, in the policy's words; "" nothing."""
    from llama_cpp import llama_chat_format  # noqa: PLC0415

    handlers = tuple(getattr(llama_chat_format, name) for name in ("Llava15ChatHandler", "MTMDChatHandler")
                     if hasattr(llama_chat_format, name))
    return f"the chat handler {type(llm.chat_handler).__name__}" if isinstance(llm.chat_handler, handlers) else ""


def _refuse_multimodal(llm) -> None:
    """A multimodal chat handler set after enable: refused when generate is called."""
    cause = _native._llama_unvouched(multimodal=_multimodal(llm))
    if cause:
        raise refused(f"pfx's rule: {cause}, which pfx's record cannot follow; multimodal chat is not supported")


def _fingerprint(llm) -> tuple:
    """What a saved record must match to be taken back: llama-cpp-python's version, the model file
    (its size and modification time) and the settings that decide a row's bits (ROW_SETTINGS)."""
    import llama_cpp  # noqa: PLC0415

    settings = llm.__getstate__()
    try:
        stat = os.stat(llm.model_path)
        file = (stat.st_size, stat.st_mtime_ns)
    except OSError:
        file = None
    return (llama_cpp.__version__, file) + tuple((name, repr(settings.get(name))) for name in ROW_SETTINGS)
