"""pfx's rule in charge of vLLM's prefix cache: a vLLM plugin (docs/engines.md, "vLLM").

vLLM offers a request any full cached block whose hash chain matches its prompt, blocks that decode
wrote included, and cuts a hit only to its block size. Reusing a row that decode wrote breaks
bit-exactness with a cold run (INV-2, canonical_end): decode computes a row with other kernels, in
another order, than the prefill of a cold run does. With the plugin on, vLLM's KV cache manager does
two things differently, and nothing else:

- only rows that a prefill wrote enter the prefix cache: a request's blocks are cached up to its
  prompt's end, never past it (canonical_end), so a block holding a row that decode wrote is never
  offered to a later request;
- each hit is cut by pfx's rule, decided by pfx's core (``pfx.decide``, the C++ code every other
  integration runs): at least one token left, aligned down to the chunk grid, at least keep_min.
  vLLM's ``num_cached_tokens`` of the request is then pfx's offset.

One premise of vLLM's own is kept on top of the rule (``step_alone``): vLLM computes a step that
prefills a single token otherwise than a step of several (one unit in the last place, measured by
``pfx.integrations.vllm_conform``), so a resume ends its prefill with such a step exactly when the cold
run does: where the rule's offset would break that, it is lowered by whole chunks.

It is loaded in every vLLM process through the ``vllm.general_plugins`` entry point (``register``),
the engine-core process included, and is off unless ``PFX_VLLM`` turns it on (``PFX_VLLM=1``). Its knobs, read by pfx's one
environment parser (a malformed value stops vLLM's start with a ``pfx.ConfigError`` naming it):

- ``PFX_VLLM_CHUNK``: the chunk grid, a multiple of vLLM's block size; unset: the block size, the
  grid ``pfx.integrations.vllm_conform`` finds exact on vLLM's CPU build with the premise above
  (docs/engines.md).
- ``PFX_VLLM_KEEP_MIN``: the fewest tokens worth reusing; unset: 0 (any aligned hit, as vLLM).

In code, ``enable(chunk=..., keep_min=...)`` before ``vllm.LLM(...)`` does the same: it sets the
three variables for the processes vLLM starts, and patches this one. ``decisions()`` counts this
process's decisions by reason; each is logged at debug level on the logger ``vllm.pfx``.

The plugin patches three methods (the scheduler's constructor, the hit lookup, the block caching) and
refuses a vLLM version it was not tested with
(``TESTED_VERSIONS``) rather than patch code it does not know.
"""
from __future__ import annotations

import collections
import logging
import os
import threading
from dataclasses import dataclass
from typing import Optional

from .. import _native

TESTED_VERSIONS = ("0.32.0",)
ENABLE_VARIABLE = "PFX_VLLM"
CHUNK_VARIABLE = "PFX_VLLM_CHUNK"
KEEP_MIN_VARIABLE = "PFX_VLLM_KEEP_MIN"
DEFAULT_KEEP_MIN = 0

_logger = logging.getLogger("vllm.pfx")


@dataclass(frozen=True)
class Settings:
    """What the plugin applies: ``chunk`` None means vLLM's block size."""
    chunk: Optional[int] = None
    keep_min: int = DEFAULT_KEEP_MIN


def settings_from_environment(environ=None) -> Optional[Settings]:
    """The settings PFX_VLLM, PFX_VLLM_CHUNK and PFX_VLLM_KEEP_MIN of ``environ`` (default: os.environ)
    ask for; None when the plugin is off (PFX_VLLM unset or off). PFX_VLLM is read as every pfx switch
    is (driver/src/environment.cpp: 1, true, on, yes or empty mean on), so that one spelling means one
    thing everywhere and the error for a malformed value lists what each spelling means. A malformed
    value raises pfx.ConfigError naming its variable."""
    environ = os.environ if environ is None else environ
    flag = environ.get(ENABLE_VARIABLE)
    if flag is None or not _native.read_environment_flag(ENABLE_VARIABLE, flag):
        return None
    chunk = environ.get(CHUNK_VARIABLE)
    keep_min = environ.get(KEEP_MIN_VARIABLE)
    settings = Settings(
        chunk=None if chunk is None else _native.read_environment_count(CHUNK_VARIABLE, chunk),
        keep_min=DEFAULT_KEEP_MIN if keep_min is None else _native.read_environment_count(KEEP_MIN_VARIABLE, keep_min))
    if settings.chunk == 0:
        raise _native.ConfigError(f'{CHUNK_VARIABLE}="{chunk}" is malformed: expected a chunk of at least 1 token '
                                  f"(a multiple of vLLM's block size), or leave it unset for the block size")
    return settings


def register() -> None:
    """The ``vllm.general_plugins`` entry point: vLLM calls it in each of its processes. Installs the
    plugin when PFX_VLLM asks for it; does nothing otherwise."""
    settings = settings_from_environment()
    if settings is not None:
        _install(settings)


def enable(chunk: Optional[int] = None, keep_min: int = DEFAULT_KEEP_MIN) -> Settings:
    """Turns the plugin on for this process and the processes vLLM starts from it (call it before
    ``vllm.LLM(...)``): sets PFX_VLLM=1, PFX_VLLM_CHUNK (unless ``chunk`` is None: vLLM's block size)
    and PFX_VLLM_KEEP_MIN. Raises TypeError or ValueError naming a bad argument, RuntimeError for a
    vLLM version the plugin was not tested with."""
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk must be None (vLLM's block size) or an int >= 1, a multiple of the block size; "
                         f"got {chunk!r}")
    if isinstance(keep_min, bool) or not isinstance(keep_min, int) or keep_min < 0:
        raise ValueError(f"keep_min must be an int >= 0; got {keep_min!r}")
    settings = Settings(chunk=chunk, keep_min=keep_min)
    _install(settings)
    os.environ[ENABLE_VARIABLE] = "1"
    if chunk is None:
        os.environ.pop(CHUNK_VARIABLE, None)
    else:
        os.environ[CHUNK_VARIABLE] = str(chunk)
    os.environ[KEEP_MIN_VARIABLE] = str(keep_min)
    return settings


def disable() -> None:
    """Turns the plugin off for engines made afterwards, in this process and the processes vLLM
    starts from it (unsets PFX_VLLM). An engine made while it was on keeps the rule it was made with."""
    global _settings
    with _lock:
        _settings = None
    for variable in (ENABLE_VARIABLE, CHUNK_VARIABLE, KEEP_MIN_VARIABLE):
        os.environ.pop(variable, None)


def decisions() -> collections.Counter:
    """This process's decisions so far, counted by reason ("reused", "below_keep_min", ...), plus
    "tokens_held" (tokens vLLM's cache held for the requests) and "tokens_reused" (the offsets pfx
    allowed). In vLLM's multiprocess mode the decisions are taken in the engine-core process: there,
    read vLLM's own ``num_cached_tokens`` of each output, or the debug log."""
    with _lock:
        return collections.Counter(_decisions)


_lock = threading.Lock()
_settings: Optional[Settings] = None
_originals: dict = {}
_decisions: collections.Counter = collections.Counter()


def _check_version() -> None:
    import vllm
    version = getattr(vllm, "__version__", "unknown")
    if version.split("+")[0] not in TESTED_VERSIONS:
        raise RuntimeError(
            f"pfx.integrations.vllm was tested with vLLM {', '.join(TESTED_VERSIONS)}, and this is vLLM {version}: "
            f"it does not patch a KV cache manager it does not know. Install a tested version, or unset "
            f"{ENABLE_VARIABLE} to run vLLM without pfx.")


def _install(settings: Settings) -> None:
    """Sets the settings, and patches vLLM's KV cache manager once per process."""
    global _settings
    _check_version()
    from vllm.v1.core.kv_cache_coordinator import KVCacheCoordinator
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler
    with _lock:
        _settings = settings
        if _originals:
            return
        _originals["init"] = Scheduler.__init__
        _originals["get_computed_blocks"] = KVCacheManager.get_computed_blocks
        _originals["cache_blocks"] = KVCacheCoordinator.cache_blocks
        Scheduler.__init__ = _scheduler_init
        KVCacheManager.get_computed_blocks = _get_computed_blocks
        KVCacheCoordinator.cache_blocks = _cache_blocks


def _scheduler_init(self, *args, **kwargs) -> None:
    """vLLM's scheduler, then the rule's configuration for its KV cache manager (None: the plugin was off
    when it was made). The chunk must be a multiple of the block size: vLLM resumes only at block
    bounds. The manager also learns the scheduler's prefill step (step_alone)."""
    _originals["init"](self, *args, **kwargs)
    settings = _settings
    manager = self.kv_cache_manager
    manager.pfx_config = None
    if settings is None or not manager.enable_caching:
        return
    block = manager.coordinator.scheduler_block_size
    chunk = block if settings.chunk is None else settings.chunk
    if chunk % block != 0:
        raise _native.ConfigError(f"{CHUNK_VARIABLE}={chunk} is not a multiple of vLLM's block size {block}: vLLM "
                                  f"resumes a prompt only at a block bound; use a multiple of {block}")
    manager.pfx_config = _native.Config(enabled=True, keep_min=settings.keep_min, chunk=chunk)
    manager.pfx_step = prefill_step(self.scheduler_config)
    manager.coordinator.pfx_prompt_rows_only = True
    _logger.info("pfx: vLLM's prefix cache under pfx's rule: chunk %d, keep_min %d, prefill step %s, rows decode "
                 "wrote never cached", chunk, settings.keep_min, manager.pfx_step)


def prefill_step(scheduler_config) -> Optional[int]:
    """How many prompt tokens vLLM's scheduler computes in one step of a request served alone: its
    token budget, or its long-prefill threshold when lower; None without chunked prefill (one step)."""
    if not scheduler_config.enable_chunked_prefill:
        return None
    step = scheduler_config.max_num_batched_tokens
    threshold = scheduler_config.long_prefill_token_threshold or 0
    return threshold if 0 < threshold < step else step


def step_alone(tokens: int, step: Optional[int]) -> bool:
    """Whether prefilling `tokens` (>= 1) tokens in steps of `step` (None: one step) ends with a step
    that computes one token alone."""
    return tokens == 1 if step is None else (tokens - 1) % step == 0


def vllm_offset(decision_offset: int, prompt_length: int, chunk: int, keep_min: int, step: Optional[int]) -> int:
    """The rule's offset, lowered by whole chunks until the resumed prefill ends with a one-token step
    exactly when the cold run's does (vLLM computes such a step otherwise); 0 below keep_min."""
    offset = decision_offset
    alone = step_alone(prompt_length, step)
    while offset > 0 and step_alone(prompt_length - offset, step) != alone:
        offset -= chunk
    return offset if offset >= keep_min else 0


def _get_computed_blocks(self, request):
    """vLLM's longest cache hit, cut by pfx's rule. The hit holds only rows that a prefill wrote
    (_cache_blocks), so the record is the hit's tokens with canonical_end at its end."""
    blocks, hit, boundary = _originals["get_computed_blocks"](self, request)
    config = getattr(self, "pfx_config", None)
    if config is None or not self.prefix_cache_lookup_enabled(request):
        return blocks, hit, boundary
    tokens = request.all_token_ids
    decision = _native.decide(config, tokens[:hit], hit, tokens)
    offset = vllm_offset(decision.offset, len(tokens), config.chunk, config.keep_min, self.pfx_step)
    if offset < hit:
        blocks = self.truncate_computed_blocks(blocks, offset)
        boundary = boundary if boundary <= offset else 0
    _logger.debug("pfx: request %s of %d tokens: vLLM's cache holds %d, the rule allows %d (%s, bound %s), pfx "
                  "takes %d", request.request_id, len(tokens), hit, decision.offset, decision.reason.name,
                  decision.bound.name, offset)
    with _lock:
        _decisions[decision.reason.name] += 1
        _decisions["lowered_for_a_one_token_step"] += offset < decision.offset
        _decisions["tokens_held"] += hit
        _decisions["tokens_reused"] += offset
    return blocks, offset, boundary


def _cache_blocks(self, request, num_computed_tokens: int) -> None:
    """vLLM's caching of a request's full blocks, never past its prompt: rows from the prompt's end on
    were written by decode (INV-2, canonical_end)."""
    if getattr(self, "pfx_prompt_rows_only", False):
        num_computed_tokens = min(num_computed_tokens, request.num_prompt_tokens)
    _originals["cache_blocks"](self, request, num_computed_tokens)
