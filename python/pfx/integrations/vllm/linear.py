"""vLLM's CPU linear layers, made to give each row the same bits whatever the rows beside it
(docs/engines.md, "Why a row depends on its batch").

vLLM's CPU build computes a linear layer with one call of a GEMM kernel over the whole step's rows
(oneDNN's matmul, sgl-kernel's packed GEMM, zentorch, or torch's own), and those kernels choose their
code path by the call's row count M: a row computed with M = 1 (a request decoding alone) takes
another path than the same row among M = 2 or more (measured in float32 and bfloat16 at the
reduction lengths of real models: K = 4096), and in bfloat16 on a CPU without AVX512-BF16 the last
row of an odd M takes a path of its own. So a request's logits depend on how many rows vLLM's step
holds: its own prefill step's length, and whatever is batched beside it.

``fixed_rows`` wraps a layer's kernel so that every call it makes has exactly ``ROWS`` rows: the
step's rows in consecutive blocks of ``ROWS``, the last one padded with zero rows that are dropped
afterwards. Each row is then computed by a call of one shape, whatever the step holds; a kernel does
not mix rows, so a row's bits depend on its own values only (measured: every block position and any
neighbours give the same bits, float32 and bfloat16, with and without AVX512-BF16). The price is a
decode step of up to ``ROWS`` requests computed as ``ROWS`` rows, and a long prefill in calls of
``ROWS`` rows rather than one (docs/performance.md, "The price of batch invariance").
"""
from __future__ import annotations

ROWS = 16
"""Rows in every call of a wrapped kernel: one block covers the decode steps of up to 16 requests in one
call, and a prefill's calls are few enough that their overhead stays small (docs/performance.md)."""


def fixed_rows(linear, rows: int = ROWS):
    """`linear(x, weight, bias)`, vLLM's per-layer CPU kernel, computed in calls of exactly `rows` rows.
    `x` is (..., K): its leading dimensions are the rows."""
    import torch

    def invariant(x, weight, bias=None):
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).contiguous()
        count = flat.shape[0]
        if count == 0:
            return linear(x, weight, bias)
        padding = -count % rows
        if padding:
            flat = torch.cat([flat, flat.new_zeros(padding, flat.shape[1])])
        out = torch.cat([linear(flat[start:start + rows], weight, bias) for start in range(0, count + padding, rows)])
        return out[:count].reshape(*shape[:-1], out.shape[-1])

    invariant.pfx_rows = rows
    return invariant


def install() -> None:
    """Has vLLM's CPU linear layers, built from now on in this process, compute in fixed calls
    (fixed_rows): wraps the kernel vLLM's ``dispatch_cpu_unquantized_gemm`` chooses for each layer
    (every unquantized linear layer and the LM head), whichever it chooses. vLLM imports that function
    when it builds a layer, so a patch made when the plugin loads, before any model, is in time."""
    from vllm.model_executor.layers import utils
    if getattr(utils.dispatch_cpu_unquantized_gemm, "pfx_fixed_rows", False):
        return
    dispatch = utils.dispatch_cpu_unquantized_gemm

    def dispatch_fixed_rows(layer, remove_weight: bool) -> None:
        dispatch(layer, remove_weight)
        kernel = getattr(layer, "cpu_linear", None)  # None: not a linear layer (a convolution's weight)
        if kernel is not None and not getattr(kernel, "pfx_rows", None):
            layer.cpu_linear = fixed_rows(kernel)

    dispatch_fixed_rows.pfx_fixed_rows = True
    dispatch_fixed_rows.pfx_original = dispatch
    utils.dispatch_cpu_unquantized_gemm = dispatch_fixed_rows


def installed() -> bool:
    """Whether this process's vLLM builds its CPU linear layers with fixed calls."""
    from vllm.model_executor.layers import utils
    return bool(getattr(utils.dispatch_cpu_unquantized_gemm, "pfx_fixed_rows", False))


def uninstall() -> None:
    """vLLM's own dispatch again, for layers built from now on."""
    from vllm.model_executor.layers import utils
    original = getattr(utils.dispatch_cpu_unquantized_gemm, "pfx_original", None)
    if original is not None:
        utils.dispatch_cpu_unquantized_gemm = original
