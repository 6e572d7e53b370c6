"""A pytest plugin (``-p upstream_rule``) that puts pfx's rule in charge of every KV cache manager vLLM's
own tests make, so that their prefix-caching suite runs against the plugin (test_vllm_upstream.py).

pfx.integrations.vllm is installed as PFX_VLLM=1 installs it, with its default settings (the chunk is
the block size, keep_min 0). In an engine, the scheduler's constructor gives its KV cache manager the
rule's configuration; vLLM's tests mostly make a KV cache manager alone, without a scheduler, so each
manager gets it here, from its own block size, as the scheduler's constructor would. A manager made by
a scheduler then gets the scheduler's (the plugin's own _scheduler_init, which reads the prefill step
from the scheduler's configuration).

The plugin's settings are PFX_VLLM_BATCH_INVARIANT's, as in a vLLM process (its default: vLLM computes
batch invariantly). The prefill step of a manager made alone is the plugin's for a scheduler without
chunked prefill: none where vLLM computes a one-token step as a longer one (batch invariance on the
CPU build: pfx's batch-invariant kernels), else ONE_STEP, a whole prompt in one step. vLLM's tests
drive such a manager as a scheduler without chunked prefill would: each request's hit is looked up,
then the rest of its prompt is allocated in one ``allocate_slots`` call, one step; no scheduler budget
is there to cut it into chunks.
"""
from __future__ import annotations

import os

import pfx
from pfx.integrations import vllm as plugin
from vllm.v1.core.kv_cache_manager import KVCacheManager

plugin._install(plugin.settings_from_environment(dict(os.environ, PFX_VLLM="1")))
STEP = 0 if plugin.settings().batch_invariant else plugin.ONE_STEP
# The Config a certificate that proves decode rows exact gives the plugin (the ctest
# vllm.upstream_decode_rows_exact): rows decode wrote are cached and reused as vLLM's own.
DECODE_ROWS_EXACT = bool(os.environ.get("PFX_VLLM_UPSTREAM_DECODE_ROWS_EXACT"))
_manager_init = KVCacheManager.__init__


_configured = 0  # the managers given the rule's configuration, said at the end of the run


def _init_under_the_rule(self, *args, **kwargs) -> None:
    global _configured
    _manager_init(self, *args, **kwargs)
    # As _scheduler_init: no configuration where vLLM's prefix caching is off (nothing to decide).
    self.pfx_config = None
    if self.enable_caching:
        self.pfx_config = pfx.Config(enabled=True, keep_min=plugin.DEFAULT_KEEP_MIN,
                                     chunk=self.coordinator.scheduler_block_size, prefill_step=STEP,
                                     decode_rows_exact=DECODE_ROWS_EXACT)
        _configured += 1
    self.coordinator.pfx_config = self.pfx_config


KVCacheManager.__init__ = _init_under_the_rule


def pytest_terminal_summary(terminalreporter):
    """Said even with -q, so that a run can show the rule was on (test_vllm_upstream.py reads it)."""
    terminalreporter.write_line(f"pfx's rule configured {_configured} KV cache managers (pfx from "
                                f"{os.path.dirname(pfx.__file__)}; chunk: the block size, keep_min 0, prefill "
                                f"step {pfx._native.prefill_step_words(STEP) if STEP else 'none'} for a manager "
                                f"made alone{'; decode rows exact' if DECODE_ROWS_EXACT else ''})")
