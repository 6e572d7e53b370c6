"""The one check of a whole-number argument that pfx's Python code takes from its users (a chunk, a
count, a seed): an int, not a bool, at least a bound. Anything else is an error that names the
argument, what it must be and what it got: a TypeError for another type and a ValueError for an int
out of range, or the caller's own error type for both."""
from __future__ import annotations

from typing import Optional


def whole(name: str, value, low: Optional[int] = 0, error: Optional[type] = None, *, none: str = "", who: str = ""):
    """`value` if it is an int (not a bool) >= `low` (any int where `low` is None: the caller judges the
    range, in its own words); None where `none` says what None means and value is None. `who` prefixes
    the message (the function or class that takes the argument)."""
    if value is None and none:
        return None
    wanted = ("None (" + none + ") or " if none else "") + ("an int" if low is None else f"an int >= {low}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise (error or TypeError)(f"{who}{name} must be {wanted}, got {type(value).__name__} ({value!r})")
    if low is not None and value < low:
        raise (error or ValueError)(f"{who}{name} must be {wanted}, got {value!r}")
    return value


def count(least: int):
    """An argparse ``type``: a whole number >= `least` from the command line, else argparse's error that
    names the option and what it got (argparse adds the option's name)."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {value}")
        return value
    return parse
