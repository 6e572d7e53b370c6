"""pfx's rule in charge of vLLM's prefix cache: a vLLM plugin (docs/engines.md, "vLLM").

vLLM offers a request any full cached block whose hash chain matches its prompt, blocks that decode
wrote included, and cuts a hit only to its block size. Reusing a row that decode wrote breaks
bit-exactness with a cold run (INV-2, canonical_end): decode computes a row with other kernels, in
another order, than the prefill of a cold run does. With the plugin on, vLLM's KV cache manager does
two things differently, and nothing else:

- only rows that a prefill wrote enter the prefix cache: a request's blocks are cached up to the end
  of the first prompt it was given, never past it (canonical_end; less its last row where a one-token
  step computed that row alone: ``pfx.prefill_canonical_end``), whatever path the request takes
  afterwards (a streaming session that appends its output to its prompt, a preemption and its
  recompute), so a block holding a row that decode wrote is never offered to a later request; unless
  a certificate of the configuration served proves such rows exact (``Config.decode_rows_exact``,
  ``premises``: conform --certify resumed from them 200 times, alone, batched and joining another
  request, none differing; decode's logprobs equalled a prefill's rescoring, and the K and V rows
  decode wrote a cold prefill's, byte for byte), and no speculative
  method writes them: then every full block is cached, as vLLM does;
- each hit is decided by pfx's core (``pfx.decide``, the C++ code every other integration runs): at
  least one token left, aligned down to the chunk grid, the one-token-step premise of vLLM's scheduler
  (``Config.prefill_step``: vLLM computes a prefill step of one token otherwise than a longer one, so a
  resume ends its prefill with such a step exactly when the cold run does), at least keep_min. A hit
  shorter than vLLM's is then looked up again at that length, group by group, by vLLM's own lookup:
  a sliding-window or chunked-local group's hit is null blocks and then the blocks its window needs
  at the hit's end, which a slice of a longer hit would not hold. vLLM's ``num_cached_tokens`` of the
  request is pfx's offset.

The guarantee holds whatever vLLM batches beside a request: by default the plugin makes vLLM compute
each request's answer independently of its batch (``batch_invariance()``: on vLLM's CPU build every
linear layer in calls of a fixed row count, ``pfx.integrations.vllm.linear``, and its attention no
longer splitting a request's KV by the whole step's work, ``VLLM_CPU_ATTN_SPLIT_KV=0``; on a CUDA build
vLLM's batch-invariant mode, ``VLLM_BATCH_INVARIANT=1``, untested here) and says at start what it set
and why. With ``PFX_VLLM_BATCH_INVARIANT=0`` vLLM keeps its own kernels and the guarantee is for a
request served alone, as vLLM's scheduler runs it (the long-prefill threshold dropped, each step at
most ``max_num_scheduled_tokens``), which the plugin then says at start. Whether the rule needs the
prefill-step premise, and whether batches are independent, are premises of the configuration served
(``premises_of()``, ``pfx.integrations.vllm.premises``): measured, or proved by a certificate that
``pfx.integrations.vllm.conform --certify`` wrote for that configuration, or refused by name; on
pfx's kernels a one-token step computes as a longer one and the rule keeps that reuse
(``prefill_step()``). Speculative decoding with n-gram drafts or a draft model is served: a resume
that leaves one token is admitted padded to 1 + k rows, which the core's step model knows
(``Config.admission_padding``).
It refuses at start, naming what it cannot vouch for, rather than serve: a model with layers whose
hits cannot be cut exactly (Mamba and other state-space or linear-attention layers, layers that replay
a window after a hit), a speculative method other than n-gram drafts and a draft model, a KV connector, a chunk off
vLLM's block grid, a batch-invariance setting vLLM was told otherwise, vLLM's torch.compile (the plugin
serves vLLM running eagerly): ``pfx.Refused`` (re-exported here as
``Refused``), its ``.refusal`` ``"configuration"``, before the model loads wherever vLLM's configuration
tells.

It is loaded in every vLLM process through the ``vllm.general_plugins`` entry point (``register``),
the engine-core process included, and is off unless ``PFX_VLLM`` turns it on. With ``PFX_VLLM`` set,
a vLLM that did not load it (``VLLM_PLUGINS`` naming other plugins only, or pfx failing to import)
stops at start instead of serving without it (``pfx.integrations.vllm.guard``). Its knobs, read by
pfx's one environment parser (a malformed value stops vLLM's start, before the model loads, with a
``pfx.ConfigError`` naming it and what each value means for vLLM):

- ``PFX_VLLM``: 1, true, on, yes or empty: the plugin on; 0, false, off or no: off (vLLM's own prefix
  caching, unchanged).
- ``PFX_VLLM_CHUNK``: the chunk grid, a multiple of vLLM's block size; unset: the block size, the
  grid ``pfx.integrations.vllm.conform`` finds exact on vLLM's CPU build (docs/engines.md).
- ``PFX_VLLM_KEEP_MIN``: the fewest cached tokens worth taking; unset: 0 (any aligned hit, as vLLM).
- ``PFX_VLLM_BATCH_INVARIANT``: 1, true, on, yes, empty or unset: vLLM computes batch invariantly
  (above); 0, false, off or no: vLLM's own kernels, and a guarantee for a request served alone
  (float32 only, or with a certificate).
- ``PFX_VLLM_CERTIFICATE``: a certificate ``pfx.integrations.vllm.conform --certify`` wrote; the
  plugin takes the premises it proves, for the configuration it names only (``premises``).

In code, ``enable(chunk=..., keep_min=..., batch_invariant=...)`` before ``vllm.LLM(...)`` does the
same: it sets the four variables for the processes vLLM starts, and patches this one. ``decisions()`` counts this
process's decisions by reason; each is logged at debug level on the logger ``vllm.pfx``.

The plugin patches five methods (the configuration's constructor and its check, the scheduler's
constructor, the hit lookup, the block caching) and refuses a vLLM version it was not tested with (``TESTED_VERSIONS``)
rather than patch code it does not know.
"""
from __future__ import annotations

import collections
import logging
import os
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

from ... import _native
from ..._arguments import whole
from ..._refusals import CONFIGURATION, UNTESTED_VERSION, refused as _refused
from . import attention, linear, premises as _premises
# The rule's configuration (pfx.integrations.vllm.rule), which conform builds with too; its names stay
# this module's as well.
from .rule import ONE_STEP, admission_padding, off_the_block_grid, rule_config, scheduler_step  # noqa: F401
from .rule import prefill_step as _prefill_step

TESTED_VERSIONS = ("0.32.0",)
ENABLE_VARIABLE = "PFX_VLLM"
CHUNK_VARIABLE = "PFX_VLLM_CHUNK"
KEEP_MIN_VARIABLE = "PFX_VLLM_KEEP_MIN"
BATCH_INVARIANT_VARIABLE = "PFX_VLLM_BATCH_INVARIANT"
DEFAULT_KEEP_MIN = 0
SPECULATIVE_METHODS = ("ngram", "draft_model")
"""The speculative methods the plugin serves: n-gram drafts and a draft model, measured exact on vLLM's
CPU build, batched and alone, with the padded admission and the draft slots in the step model
(docs/engines.md, "Speculative decoding"). EAGLE, MTP and the other methods, whose draft heads keep
hidden states of their own and whose lookups drop a block, were not measured here: refused by name."""

_MEANINGS = {
    ENABLE_VARIABLE: "1, true, on, yes or empty (the plugin on: pfx's rule decides how much of each prompt vLLM "
                     "takes from its prefix cache) or 0, false, off or no (the plugin off: vLLM's own prefix "
                     "caching, unchanged)",
    CHUNK_VARIABLE: "a count of tokens >= 1, a multiple of vLLM's block size (the grid vLLM may resume a prompt "
                    "on), or leave it unset for the block size",
    KEEP_MIN_VARIABLE: "a count of tokens >= 0 (a cached prefix shorter than this is not taken: the prompt is "
                       "computed in full), or leave it unset for 0",
    BATCH_INVARIANT_VARIABLE: "1, true, on, yes, empty or unset (vLLM computes each request's answer "
                              "independently of what is batched beside it, and pfx's guarantee holds under load) "
                              "or 0, false, off or no (vLLM's own kernels: the guarantee is for a request served "
                              "alone)",
}

_logger = logging.getLogger("vllm.pfx")


Refused = _native.Refused
"""pfx.Refused, pfx's one refusal type, under the name the plugin's users catch. The plugin raises it when
it refuses a vLLM configuration it cannot vouch for (a model kind, an option, a chunk off vLLM's block
grid), or a vLLM version it was not tested with: vLLM stops at start rather than serve answers pfx's rule
would not keep exact. Its ``.refusal`` is REFUSAL (UNTESTED_VERSION for a version); it is both a
RuntimeError and a ValueError."""

REFUSAL = CONFIGURATION
"""The ``.refusal`` of the plugin's refusals of a configuration: one the plugin cannot vouch for."""


class _Refusal(RuntimeError):
    """A refusal on its way out of vLLM's configuration check. pydantic runs that check inside
    VllmConfig's constructor and turns a ValueError raised there, as pfx.Refused is, into its own
    ValidationError; it passes this one on as it is, and _config_init raises pfx.Refused in its place."""


@dataclass(frozen=True)
class Settings:
    """What the plugin applies: ``chunk`` None means vLLM's block size; ``batch_invariant``, whether vLLM
    is made to compute each request's answer independently of its batch (batch_invariance())."""
    chunk: Optional[int] = None
    keep_min: int = DEFAULT_KEEP_MIN
    batch_invariant: bool = True


def _read(variable: str, value: str, read):
    """`read(variable, value)` (pfx's environment parser), its ConfigError saying what the values mean
    for vLLM rather than for a lane."""
    try:
        return read(variable, value)
    except _native.ConfigError:
        raise _native.ConfigError(f'{variable}="{value}" is malformed: expected {_MEANINGS[variable]}') from None


def settings_from_environment(environ=None) -> Optional[Settings]:
    """The settings PFX_VLLM, PFX_VLLM_CHUNK, PFX_VLLM_KEEP_MIN and PFX_VLLM_BATCH_INVARIANT of ``environ``
    (default: os.environ)
    ask for; None when the plugin is off (PFX_VLLM unset or off). PFX_VLLM is read as every pfx switch
    is (driver/src/environment.cpp: 1, true, on, yes or empty mean on), so that one spelling means one
    thing everywhere. A malformed value raises pfx.ConfigError naming its variable and what each value
    means for vLLM."""
    environ = os.environ if environ is None else environ
    flag = environ.get(ENABLE_VARIABLE)
    if flag is None or not _read(ENABLE_VARIABLE, flag, _native.read_environment_flag):
        return None
    chunk = environ.get(CHUNK_VARIABLE)
    keep_min = environ.get(KEEP_MIN_VARIABLE)
    batch_invariant = environ.get(BATCH_INVARIANT_VARIABLE)
    settings = Settings(
        chunk=None if chunk is None else _read(CHUNK_VARIABLE, chunk, _native.read_environment_count),
        keep_min=DEFAULT_KEEP_MIN if keep_min is None else _read(KEEP_MIN_VARIABLE, keep_min,
                                                                 _native.read_environment_count),
        batch_invariant=batch_invariant is None or _read(BATCH_INVARIANT_VARIABLE, batch_invariant,
                                                         _native.read_environment_flag))
    if settings.chunk == 0:
        raise _native.ConfigError(f'{CHUNK_VARIABLE}="{chunk}" is malformed: expected {_MEANINGS[CHUNK_VARIABLE]}')
    return settings


def register() -> None:
    """The ``vllm.general_plugins`` entry point: vLLM calls it in each of its processes. Installs the
    plugin when PFX_VLLM asks for it; does nothing otherwise."""
    settings = settings_from_environment()
    if settings is not None:
        _install(settings)


def enable(chunk: Optional[int] = None, keep_min: int = DEFAULT_KEEP_MIN, batch_invariant: bool = True) -> Settings:
    """Turns the plugin on for this process and the processes vLLM starts from it (call it before
    ``vllm.LLM(...)``): sets PFX_VLLM=1, PFX_VLLM_CHUNK (unless ``chunk`` is None: vLLM's block size),
    PFX_VLLM_KEEP_MIN and PFX_VLLM_BATCH_INVARIANT, and, with ``batch_invariant``, vLLM's own variable
    that makes it compute batch invariantly (batch_invariance()). Raises ValueError naming a bad
    argument, pfx.Refused (a RuntimeError too) for a vLLM version the plugin was not tested with."""
    whole("chunk", chunk, 1, ValueError, none="vLLM's block size")  # on the block grid: known when vLLM starts
    whole("keep_min", keep_min, 0, ValueError)
    if not isinstance(batch_invariant, bool):
        raise ValueError(f"batch_invariant must be True or False; got {batch_invariant!r}")
    settings = Settings(chunk=chunk, keep_min=keep_min, batch_invariant=batch_invariant)
    _install(settings)
    os.environ[ENABLE_VARIABLE] = "1"
    if chunk is None:
        os.environ.pop(CHUNK_VARIABLE, None)
    else:
        os.environ[CHUNK_VARIABLE] = str(chunk)
    os.environ[KEEP_MIN_VARIABLE] = str(keep_min)
    os.environ[BATCH_INVARIANT_VARIABLE] = "1" if batch_invariant else "0"
    return settings


def disable() -> None:
    """Turns the plugin off for engines made afterwards, in this process and the processes vLLM
    starts from it (unsets PFX_VLLM). An engine made while it was on keeps the rule it was made with."""
    global _settings
    with _lock:
        _settings = None
    for variable in (ENABLE_VARIABLE, CHUNK_VARIABLE, KEEP_MIN_VARIABLE, BATCH_INVARIANT_VARIABLE):
        os.environ.pop(variable, None)
    for variable in _set_by_pfx:  # vLLM's own variables the plugin set, and only those
        os.environ.pop(variable, None)
    _set_by_pfx.clear()
    linear.uninstall()


def decisions() -> collections.Counter:
    """This process's decisions so far, counted by reason ("reused", "below_keep_min", ...), plus
    "tokens_held" (tokens vLLM's cache held for the requests), "tokens_reused" (the offsets pfx
    allowed), "lowered_for_the_prefill_step" (decisions the one-token-step premise cut) and
    "looked_up_again" (hits found again at a shorter length). In vLLM's multiprocess mode the decisions
    are taken in the engine-core process: there, read vLLM's own ``num_cached_tokens`` of each output,
    or the debug log."""
    with _lock:
        return collections.Counter(_decisions)


def check_loaded() -> None:
    """Raises pfx.ConfigError when PFX_VLLM asks for the plugin and this process's vLLM has not
    installed it: vLLM would serve without pfx while its user believes pfx on. vLLM loads its plugins
    only through ``load_general_plugins``, which skips a plugin ``VLLM_PLUGINS`` does not name and goes
    on when a plugin fails to import; ``pfx.integrations.vllm.guard`` calls this after it."""
    settings = settings_from_environment()
    if settings is None or _originals:
        return
    allowed = os.environ.get("VLLM_PLUGINS")
    why = (f'VLLM_PLUGINS="{allowed}" does not name pfx\'s plugin "pfx"' if allowed is not None
           and "pfx" not in allowed.split(",") else "vLLM did not load pfx's plugin (see vLLM's log above: "
           "\"Failed to load plugin pfx\")")
    raise _native.ConfigError(f"{ENABLE_VARIABLE}={os.environ[ENABLE_VARIABLE]} asks for pfx's rule in charge of "
                              f"vLLM's prefix cache, but {why}: vLLM would serve without it. Add pfx to "
                              f"VLLM_PLUGINS, or unset {ENABLE_VARIABLE} to run vLLM without pfx.")


_lock = threading.Lock()
_settings: Optional[Settings] = None
_originals: dict = {}
_decisions: collections.Counter = collections.Counter()
_set_by_pfx: set = set()
# How deep this thread is in VllmConfig's constructors (_config_init): there, a refusal travels as _Refusal.
_constructing = threading.local()


def _check_version() -> None:
    import vllm
    version = getattr(vllm, "__version__", "unknown")
    if version.split("+")[0] not in TESTED_VERSIONS:
        raise _refused(
            f"pfx.integrations.vllm was tested with vLLM {', '.join(TESTED_VERSIONS)}, and this is vLLM {version}: "
            f"it does not patch a KV cache manager it does not know. Install a tested version, or unset "
            f"{ENABLE_VARIABLE} to run vLLM without pfx.", UNTESTED_VERSION)


def _install(settings: Settings) -> None:
    """Sets the settings, and patches vLLM once per process."""
    global _settings
    _check_version()
    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_coordinator import KVCacheCoordinator
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler
    with _lock:
        _settings = settings
        if settings.batch_invariant:
            apply_batch_invariance()
        else:
            linear.uninstall()
        if _originals:
            return
        _originals["config"] = VllmConfig.__post_init__
        _originals["config_init"] = VllmConfig.__init__
        _originals["init"] = Scheduler.__init__
        _originals["get_computed_blocks"] = KVCacheManager.get_computed_blocks
        _originals["cache_blocks"] = KVCacheCoordinator.cache_blocks
        VllmConfig.__post_init__ = _config_post_init
        VllmConfig.__init__ = _config_init
        Scheduler.__init__ = _scheduler_init
        KVCacheManager.get_computed_blocks = _get_computed_blocks
        KVCacheCoordinator.cache_blocks = _cache_blocks


def batch_invariance():
    """(variable, value): vLLM's own environment variable, and its value, that make it compute each
    request's answer independently of what is batched beside it on this platform; None where pfx knows
    no such setting. On the CPU build there are two causes of batch dependence (docs/engines.md, "Why a
    row depends on its batch"): its attention's KV split (``VLLM_CPU_ATTN_SPLIT_KV``, on by default):
    whether a request's KV is split depends on the whole step's work, not on that request alone; and its
    linear layers, whose kernels choose their path by the step's row count, which
    apply_batch_invariance() fixes with pfx's own wrapper (``pfx.integrations.vllm.linear``). On CUDA it
    is vLLM's batch-invariant mode (``VLLM_BATCH_INVARIANT``), wired but untested here: no GPU ran it,
    so a CUDA configuration is served only with a certificate (``premises``)."""
    from vllm.platforms import current_platform
    if current_platform.is_cpu():
        return ("VLLM_CPU_ATTN_SPLIT_KV", "0")
    if current_platform.is_cuda():
        return ("VLLM_BATCH_INVARIANT", "1")
    return None


def apply_batch_invariance() -> None:
    """Sets batch_invariance()'s variable in this process's environment, which the processes vLLM starts
    inherit, unless the user set it: a value that asks otherwise is refused at start
    (batch_invariance_refusals()), never overridden silently. vLLM reads it lazily, when its engine
    builds a step, so setting it when the plugin loads is in time. On the CPU build it also has the
    linear layers vLLM builds from now on compute in calls of a fixed row count (linear.install())."""
    setting = batch_invariance()
    if setting is not None and setting[0] not in os.environ:
        os.environ[setting[0]] = setting[1]
        _set_by_pfx.add(setting[0])
    from vllm.platforms import current_platform
    if current_platform.is_cpu():
        linear.install()
        attention.install()


def batch_invariance_refusals(settings: Settings) -> list:
    """What stops batch invariance, if it is asked for: a platform pfx knows no setting of, or vLLM's
    variable set by the user to ask otherwise."""
    if not settings.batch_invariant:
        return []
    setting = batch_invariance()
    if setting is None:
        from vllm.platforms import current_platform
        return [f"{BATCH_INVARIANT_VARIABLE} asks for answers independent of their batch, and pfx knows no setting "
                f"that makes vLLM on {current_platform.device_name or 'this platform'} compute so: set "
                f"{BATCH_INVARIANT_VARIABLE}=0 for a guarantee for a request served alone"]
    variable, value = setting
    if os.environ.get(variable, value).strip() != value:
        return [f"{variable}={os.environ[variable]} makes a request's answer depend on what vLLM batches beside it, "
                f"and {BATCH_INVARIANT_VARIABLE} (on unless set to 0) asks for answers independent of their batch: "
                f"unset {variable} (pfx sets {variable}={value}), or set {BATCH_INVARIANT_VARIABLE}=0 for vLLM's "
                f"own kernels and a guarantee for a request served alone"]
    return []


def compile_refusals(vllm_config, settings: Settings) -> list:
    """vLLM's torch.compile, refused whatever the kernels: pfx's batch-invariant linear layers
    (``linear``) cannot be traced with the step's row count left dynamic (their calls of a fixed row count
    make it a constant), so vLLM would fail at its first step; and with vLLM's own kernels the compiled
    model runs code that inductor generates, where none of the premises was measured (the suites and
    conform measure vLLM running eagerly). A premise belongs to the configuration it was measured on."""
    from vllm.config import CompilationMode
    mode = vllm_config.compilation_config.mode
    if mode == CompilationMode.NONE:
        return []
    if settings.batch_invariant and linear.installed():
        why = ("which cannot trace pfx's batch-invariant linear layers (their calls of a fixed row count make the "
               "step's row count a constant): vLLM would fail at its first step")
    else:
        why = ("whose generated kernels compute otherwise than the eager ones pfx's premises were measured on (the "
               "vLLM suites and pfx.integrations.vllm.conform run vLLM eagerly)")
    return [f"vLLM compiles the model with torch.compile (compilation mode {CompilationMode(mode).name}), {why}; "
            f"start vLLM eagerly: --enforce-eager, or vllm.LLM(enforce_eager=True)"]


def _config_init(self, *args, **kwargs) -> None:
    """VllmConfig's constructor, which checks the configuration (pydantic's validation, then
    _config_post_init): the plugin's refusal comes out of it as pfx.Refused, never as pydantic's
    ValidationError. Every VllmConfig vLLM makes goes through here, ``dataclasses.replace`` included."""
    depth = getattr(_constructing, "depth", 0)
    _constructing.depth = depth + 1
    try:
        _originals["config_init"](self, *args, **kwargs)
    except _Refusal as refusal:
        raise _refused(str(refusal)) from None
    finally:
        _constructing.depth = depth


def _config_post_init(self) -> None:
    """vLLM's check of its configuration, then pfx's own, before any model is loaded: what the plugin
    cannot vouch for stops the start here (refusals()), with the settings' chunk off the block grid."""
    _originals["config"](self)
    settings = _settings
    model = getattr(self, "model_config", None)
    if settings is None or model is None or getattr(model, "is_submodel_config", False):
        return
    cache = self.cache_config
    if not cache.enable_prefix_caching:
        return
    reasons = _start_refusals(self, settings, settings.chunk, cache.block_size)
    if reasons:
        message = "pfx's vLLM plugin refuses this configuration: " + "; ".join(reasons)
        # Inside VllmConfig's constructor pydantic would wrap pfx.Refused, a ValueError: the refusal passes
        # through it as _Refusal, and _config_init raises pfx.Refused. Called alone, as vLLM's engine core
        # checks its configuration again, nothing wraps it.
        raise _Refusal(message) if getattr(_constructing, "depth", 0) else _refused(message)


def _start_refusals(vllm_config, settings: Settings, chunk: Optional[int], block: Optional[int],
                    groups: Sequence[str] = ()) -> list:
    """Every reason the plugin refuses to serve `vllm_config` with `settings` (the configuration's check
    and the scheduler's ask the same; the scheduler knows the KV cache `groups`' refusals too), else why
    no premise covers it (_unproven), else none."""
    reasons = (refusals(vllm_config) + list(groups) + _chunk_refusals(chunk, block)
               + batch_invariance_refusals(settings) + compile_refusals(vllm_config, settings))
    return reasons or _unproven(vllm_config, settings)


def _chunk_refusals(chunk: Optional[int], block: Optional[int]) -> list:
    reason = off_the_block_grid(chunk, block, CHUNK_VARIABLE)
    return [reason] if reason else []


def settings() -> Optional[Settings]:
    """The settings this process's plugin applies to the engines made from now on; None when it is off."""
    return _settings


def refusals(vllm_config) -> list:
    """What the plugin cannot vouch for in `vllm_config`, known before the model loads, each with why."""
    reasons = []
    model = vllm_config.model_config
    if model.is_hybrid or model.has_inner_state or model.is_attention_free:
        reasons.append(f"{model.model}: {_state_layers(model.hf_text_config)} keep a Mamba, linear-attention or other "
                       f"state-space state: its hit is the state at its end, computed over the earlier run's prefill "
                       f"steps, which a cold run of a longer prompt steps otherwise, so a resume from it is not its "
                       f"cold run")
    speculative = vllm_config.speculative_config
    if speculative is not None and speculative.method not in SPECULATIVE_METHODS:
        reasons.append(f"speculative decoding by the method {speculative.method!r}: pfx serves "
                       f"{' and '.join(repr(m) for m in SPECULATIVE_METHODS)}, measured exact with its rule; this "
                       f"method's draft head keeps hidden states of its own and drops a block of each hit, and was "
                       f"never measured exact")
    if vllm_config.kv_transfer_config is not None:
        connector = getattr(vllm_config.kv_transfer_config, "kv_connector", None)
        reasons.append(f"a KV connector ({connector}) is configured: it extends a hit by tokens it loads, uncut "
                       f"by pfx's rule, and rows a connector brings were not written by this engine's prefill")
    return reasons


def _layers(names) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _state_layers(hf_config) -> str:
    """The layers of a model's configuration that are not attention, as its configuration names them."""
    kinds = getattr(hf_config, "layers_block_type", None) or getattr(hf_config, "layer_types", None)
    if isinstance(kinds, (list, tuple)):
        layers = [f"{i} ({kind})" for i, kind in enumerate(kinds)
                  if kind not in ("attention", "full_attention", "sliding_attention")]
        if layers:
            return "layers " + _layers(layers)
    return "its layers"


def group_refusals(kv_cache_config) -> list:
    """What the plugin cannot vouch for among the model's KV cache groups, each naming its layers: the
    groups it cuts exactly are vLLM's full attention, sliding window and chunked local attention, whose
    hit of any length vLLM's own lookup finds again; a group that replays a window after a hit is
    refused too."""
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, FullAttentionSpec, MLAAttentionSpec,
                                            SlidingWindowSpec)
    exact = (FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec)
    reasons = []
    for group in kv_cache_config.kv_cache_groups:
        spec = group.kv_cache_spec
        layers = _layers(group.layer_names)
        if type(spec) not in exact:
            reasons.append(f"layers {layers} keep a KV cache of kind {type(spec).__name__}, whose hits pfx cannot "
                           f"cut exactly")
        elif getattr(spec, "prefix_replay_tokens", 0):
            reasons.append(f"layers {layers} replay {spec.prefix_replay_tokens} tokens after a hit, steps pfx's "
                           f"rule does not model")
    return reasons


def _scheduler_init(self, *args, **kwargs) -> None:
    """vLLM's scheduler, then the rule's configuration for its KV cache manager (None: the plugin was off
    when it was made): the chunk (a multiple of the block size: vLLM resumes only at block bounds), the
    prefill step where its premise is needed and the admission padding of speculative decoding. Refuses
    a model whose KV cache groups it cannot cut exactly, naming their layers, and a batch-invariance
    setting vLLM was told otherwise, and says at start what it applies and what it vouches for."""
    _originals["init"](self, *args, **kwargs)
    settings = _settings
    manager = self.kv_cache_manager
    manager.pfx_config = None
    if settings is None:
        return
    if not manager.enable_caching:
        _logger.info("pfx: vLLM's prefix caching is off, so it reuses nothing and pfx has nothing to decide: every "
                     "request is computed in full")
        return
    block = manager.coordinator.scheduler_block_size
    chunk = block if settings.chunk is None else settings.chunk
    reasons = _start_refusals(self.vllm_config, settings, chunk, block, group_refusals(self.kv_cache_config))
    if reasons:
        raise _refused("pfx's vLLM plugin refuses this configuration: " + "; ".join(reasons))
    premises = premises_of(self.vllm_config, settings)
    manager.pfx_config = rule_config(self.vllm_config, premises, chunk, settings.keep_min)
    step, padding = manager.pfx_config.prefill_step, manager.pfx_config.admission_padding
    manager.coordinator.pfx_config = manager.pfx_config
    _logger.info("pfx: vLLM's prefix cache under pfx's rule: chunk %d, keep_min %d, %s%s; %s. %s", chunk,
                 settings.keep_min, _describe_step(step),
                 f", an admission of one token padded to {1 + padding} rows" if padding else "",
                 _decode_rows(manager.pfx_config, premises), _guarantee(premises))


def _decode_rows(config, premises: "_premises.Premises") -> str:
    """What the rule does with rows decode wrote, in the start message's words."""
    if config.decode_rows_exact:
        return f"rows decode wrote are cached and reused, proved equal to a prefill's by {premises.source}"
    if premises.decode_rows_exact:
        return ("rows decode wrote are never cached (the certificate proves them exact without speculative "
                "decoding, which is on)")
    return "rows decode wrote are never cached"


def _describe_step(step: int) -> str:
    """The step premise in the start message's words, the step in pfx conform's own (never 2^64 - 1)."""
    if step == 0:
        return "no prefill-step premise (vLLM computes a one-token prefill step as a longer one)"
    return f"prefill step {_native.prefill_step_words(step)}"


def _guarantee(premises: "_premises.Premises") -> str:
    """What the plugin vouches for, said once at start, and on what grounds: under load, or for a request
    served alone."""
    if premises.batch_invariant:
        return (f"vLLM computes each request's answer independently of its batch ({premises.source}; "
                f"{BATCH_INVARIANT_VARIABLE}=0 keeps vLLM's own kernels): a resumed request equals its cold run "
                f"served alone, bit for bit, whatever is batched beside it")
    return (f"a request served alone resumes bit for bit as its cold run ({premises.source}); batched beside "
            f"other requests, vLLM's answer can differ by itself, with or without pfx (python -m "
            f"pfx.integrations.vllm.conform measures it)")


def premises_of(vllm_config, settings: Optional[Settings] = None) -> "_premises.Premises":
    """The premises the rule leans on for the configuration `vllm_config` serves, with `settings`
    (default: this process's, or the defaults): from a certificate (PFX_VLLM_CERTIFICATE) or from what
    was measured of such a configuration (``pfx.integrations.vllm.premises``); Refused naming the
    configuration and what to do where neither covers it."""
    settings = settings or _settings or Settings()
    block = vllm_config.cache_config.block_size
    chunk = block if settings.chunk is None else settings.chunk
    try:
        return _premises.decide(vllm_config, settings.batch_invariant, chunk)
    except _premises.Unproven as error:
        raise _refused(f"pfx's vLLM plugin refuses this configuration: {error}") from None


def _unproven(vllm_config, settings: Settings) -> list:
    """premises_of()'s refusal, as a reason among the others."""
    try:
        premises_of(vllm_config, settings)
    except Refused as error:
        return [str(error).removeprefix("pfx's vLLM plugin refuses this configuration: ")]
    return []


def one_token_step_alone(vllm_config, settings: Optional[Settings] = None) -> bool:
    """Whether vLLM, as `vllm_config` serves with `settings`, computes a prefill step of one token
    otherwise than a longer one, so that the rule needs the prefill-step premise (INV-12): a premise of
    the configuration (premises_of())."""
    return premises_of(vllm_config, settings).one_token_step_alone


def prefill_step(vllm_config, premises: Optional["_premises.Premises"] = None) -> int:
    """The prefill step the rule's premise needs (``Config.prefill_step``): 0 where vLLM computes a
    one-token step as a longer one, by the configuration's premises (premises_of(), default: those of
    this process's settings); else scheduler_step()."""
    return _prefill_step(vllm_config, premises or premises_of(vllm_config))


def _get_computed_blocks(self, request):
    """The cache hit pfx's rule allows (the KV cache manager's lookup, replaced while the plugin is on).
    vLLM's own lookup finds its longest hit; its cached rows are all rows a prefill wrote
    (_cache_blocks), so the record is the hit's tokens with canonical_end at its end, and pfx's core
    decides the offset. A shorter offset is looked up again at that length, as vLLM's coordinator finds
    a hit group by group (a sliding window's hit needs the window's blocks at its end), and decided
    again, until the two agree: the largest hit both vLLM holds and the rule allows."""
    config = getattr(self, "pfx_config", None)
    if config is None or not self.prefix_cache_lookup_enabled(request):
        return _originals["get_computed_blocks"](self, request)
    tokens = request.all_token_ids
    limit = request.num_tokens - 1  # as vLLM: at least one token is computed, for its logits
    first = None
    lookups = 0
    while True:
        computed, hit, uncached = self.coordinator.find_longest_cache_hit(request.block_hashes, limit)
        lookups += 1
        # The record is the request's own tokens[:hit], which its prompt holds: the rule reads only the two
        # lengths. Zeros of those lengths stand for them, so that vLLM's ids (a multimodal placeholder is
        # -1; an id may lie outside the core's token range) never reach pfx.decide's conversion, whose
        # ValueError would stop vLLM's engine core for a prompt vLLM accepts.
        decision = _native.decide(config, bytes(hit), hit, bytes(len(tokens)))
        first = first or (hit, decision)
        if decision.offset == hit:
            break
        limit = decision.offset  # < hit <= limit: the loop ends
    # vLLM's own get_computed_blocks, from its lookup on.
    if hit > 0 and self.enable_kv_cache_events and getattr(request, "kv_cache_report_mode", "incremental") == "full":
        self.coordinator.emit_cached_block_events(request, computed)
    boundary = hit + uncached if uncached else 0
    held, decided = first
    _logger.debug("pfx: request %s of %d tokens: vLLM's cache holds %d, the rule allows %d (%s, bound %s), pfx "
                  "takes %d", request.request_id, len(tokens), held, decided.offset, decided.reason.name,
                  decided.bound.name, hit)
    with _lock:
        _decisions[decided.reason.name] += 1
        _decisions["lowered_for_the_prefill_step"] += decided.bound.name == "prefill_step"
        _decisions["looked_up_again"] += lookups > 1
        _decisions["tokens_held"] += held
        _decisions["tokens_reused"] += hit
    return self.create_kv_cache_blocks(computed), hit, boundary


def _cache_blocks(self, request, num_computed_tokens: int) -> None:
    """vLLM's caching of a request's full blocks, never past the canonical end of the first prompt it
    was given: rows from the prompt's end on were written by decode (INV-2), and where the prompt's
    prefill ended with a one-token step, its last row was computed alone, otherwise than a longer
    prompt's cold run computes it (pfx.prefill_canonical_end). The end is kept on the request at its
    first caching, because a streaming session later appends its output to its prompt and moves
    ``num_prompt_tokens`` past rows decode wrote, and a preempted request recomputes its output's rows."""
    config = getattr(self, "pfx_config", None)
    if config is not None and not config.decode_rows_exact:  # certified exact: every full block, as vLLM
        canonical_end = request.__dict__.setdefault(
            "pfx_canonical_end", _native.prefill_canonical_end(config, request.num_prompt_tokens))
        num_computed_tokens = min(num_computed_tokens, canonical_end)
    _originals["cache_blocks"](self, request, num_computed_tokens)
