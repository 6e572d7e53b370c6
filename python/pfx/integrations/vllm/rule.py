"""The rule's configuration for a vLLM configuration (``pfx.Config``), in one place: the plugin's
scheduler builds the Config it decides with from ``rule_config()``, and ``pfx.integrations.vllm.conform``
judges each grid with the same Config, its chunk the grid, so that the offsets conform resumes at are
the offsets the plugin grants, under a prefill step and under speculative decoding's padded admission
alike. Nothing here patches vLLM; it reads a ``VllmConfig`` and the premises measured for it
(``pfx.integrations.vllm.premises``)."""
from __future__ import annotations

import copy
from typing import Optional

from ... import _native

ONE_STEP = 2**64 - 1
"""``Config.prefill_step`` of a scheduler that prefills a whole prompt in one step (no chunked
prefill): a step longer than any prompt, so that a prefill ends with a one-token step only when it
computes one token."""


def scheduler_step(vllm_config) -> int:
    """How many prompt tokens vLLM's scheduler computes in one step of a request served alone: its
    scheduled-token budget (``max_num_scheduled_tokens``, by default ``max_num_batched_tokens``), at most
    ``max_num_batched_tokens`` less the draft slots a speculative method reserves for each request;
    ONE_STEP without chunked prefill. vLLM drops ``long_prefill_token_threshold`` when a single request
    is running or waiting (scheduler.py, ``schedule``), so the threshold does not count."""
    scheduler = vllm_config.scheduler_config
    if not scheduler.enable_chunked_prefill:
        return ONE_STEP
    speculative = vllm_config.speculative_config
    slots = speculative.max_num_new_slots_for_drafting if speculative is not None else 0
    budget = scheduler.max_num_scheduled_tokens or scheduler.max_num_batched_tokens
    return min(budget, scheduler.max_num_batched_tokens - slots)


def prefill_step(vllm_config, premises) -> int:
    """The prefill step the rule's premise needs (``Config.prefill_step``): 0 where vLLM computes a
    one-token step as a longer one (``premises.one_token_step_alone`` false); else scheduler_step()."""
    return scheduler_step(vllm_config) if premises.one_token_step_alone else 0


def admission_padding(vllm_config) -> int:
    """Rows vLLM adds to the admission of a request that has one prompt token left after a hit
    (``Config.admission_padding``): with speculative decoding, its scheduler pads such a request to
    1 + num_speculative_tokens rows (scheduler.py, "Pad new decode requests to uniform spec decoding
    size"), so the resume's one step is not one token alone; 0 without speculative decoding."""
    speculative = vllm_config.speculative_config
    return speculative.num_speculative_tokens if speculative is not None else 0


def off_the_block_grid(chunk: Optional[int], block: Optional[int], name: str) -> str:
    """Why the chunk `name` is off vLLM's block grid, or "": vLLM resumes a prompt only at a block bound
    (None: the block size, or a block size not known yet). The one check of the grid, which the
    plugin's start and pfx.integrations.vllm.conform both make."""
    if chunk is None or not block or chunk % block == 0:
        return ""
    return (f"{name}={chunk} is not a multiple of vLLM's block size {block}: vLLM resumes a prompt only at a block "
            f"bound; use a multiple of {block}")


def decode_rows_exact(vllm_config, premises) -> bool:
    """Whether the rule may reuse rows decode wrote (``Config.decode_rows_exact``): where the premises
    prove them exact (a certificate's), and no speculative method writes them (a certificate is made
    without one: rows a verification step of drafts wrote were never compared)."""
    return bool(premises.decode_rows_exact) and vllm_config.speculative_config is None


def rule_config(vllm_config, premises, chunk: int, keep_min: int = 0):
    """The ``pfx.Config`` the rule decides with for `vllm_config` under `premises`: `chunk` and
    `keep_min` as given, the prefill step the premises need, vLLM's admission padding, and whether rows
    decode wrote may be reused."""
    return _native.Config(enabled=True, keep_min=keep_min, chunk=chunk, prefill_step=prefill_step(vllm_config, premises),
                          admission_padding=admission_padding(vllm_config),
                          decode_rows_exact=decode_rows_exact(vllm_config, premises))


def on_grid(config, grid: int):
    """`config` with the chunk `grid`: what conform judges a grid with, the rest as the plugin decides."""
    judged = copy.copy(config)
    judged.chunk = grid
    return judged
