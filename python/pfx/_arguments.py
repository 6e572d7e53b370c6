"""The one check of a whole-number argument that pfx's Python code takes from its users (a chunk, a
count, a seed): an int, not a bool, at least a bound. Anything else is an error that names the
argument, what it must be and what it got: a TypeError for another type and a ValueError for an int
out of range, or the caller's own error type for both."""
from __future__ import annotations

from typing import Optional


def whole(name: str, value, low: int = 0, error: Optional[type] = None, *, none: str = "", who: str = ""):
    """`value` if it is an int (not a bool) >= `low`; None where `none` says what None means and value is
    None. `who` prefixes the message (the function or class that takes the argument)."""
    if value is None and none:
        return None
    meaning = f"None ({none}) or " if none else ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise (error or TypeError)(f"{who}{name} must be {meaning}an int >= {low}, got {type(value).__name__} "
                                   f"({value!r})")
    if value < low:
        raise (error or ValueError)(f"{who}{name} must be {meaning}an int >= {low}, got {value!r}")
    return value
