"""The few words the check's report and errors are made of."""
from __future__ import annotations

from typing import Optional


def counted(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def escaped(text: str) -> str:
    """Text from a trace, printed with every control character as \\xHH, as pfx prints it."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in text)
