"""What a served request returned, and its comparison with a cold run: every generated token, then
its logprob, bit for bit. The one comparison pfx's checks of an engine make."""
from __future__ import annotations

import dataclasses
import struct
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Served:
    """What an engine answered one request: the generated tokens (ids; a server that returns no ids,
    their texts), each one's logprob as the engine returned it, the prompt's tokens it took from its
    cache (None: not reported), and, where known, the prompt's length, the time to first token and the
    text."""
    tokens: tuple
    logprobs: tuple
    cached: Optional[int]
    prompt_tokens: int = 0
    ttft_s: Optional[float] = None
    text: str = ""


def same_bits(a: float, b: float) -> bool:
    """Whether two logprobs are the same number bit for bit (-0.0 is not 0.0; a NaN equals only its own bits)."""
    return struct.pack("<d", a) == struct.pack("<d", b)


def first_difference(got: Served, expected: Served) -> Optional[dict]:
    """The first step at which two outputs differ: its token, or else its logprob, bit for bit."""
    for step in range(max(len(got.tokens), len(expected.tokens))):
        a = got.tokens[step] if step < len(got.tokens) else -1
        b = expected.tokens[step] if step < len(expected.tokens) else -1
        if a != b:
            return {"where": "generated", "step": step, "got": a, "expected": b}
        if not same_bits(got.logprobs[step], expected.logprobs[step]):
            return {"where": "logprob", "step": step, "got": got.logprobs[step], "expected": expected.logprobs[step]}
    return None


def described(difference: dict) -> str:
    """first_difference's answer in pfx replay's words, a logprob with all its bits."""
    step, got, expected = difference["step"], difference["got"], difference["expected"]
    if difference["where"] == "generated":
        def token(t):
            return "none" if t == -1 else str(t)
        return f"generated token {step}: {token(got)} vs {token(expected)} cold"
    return f"logprob of generated token {step}: {_bits(got)} vs {_bits(expected)} cold"


def _bits(x: float) -> str:
    return f"{x!r} (0x{struct.pack('>d', x).hex()})"
