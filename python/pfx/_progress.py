"""The progress bar of long Python runs (pfx.conform): the `pfx` program's bar, drawn on one line of
standard error when it is a terminal and erased before the run returns, so that it never ends up in
a log or a pipe."""
from __future__ import annotations

import sys
import time


class Bar:
    """Counts `total` of `unit`; draws once the run has lasted `delay` seconds (a short run shows
    none), at most ten times a second. Callable as a progress callback: bar(done, total)."""

    def __init__(self, unit: str, stream=None, delay: float = 0.5) -> None:
        self._stream = sys.stderr if stream is None else stream
        self._unit = unit
        self._start = time.monotonic()
        self._delay = delay
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if total == 0 or now - self._start < self._delay or (self._drawn and now - self._last < 0.1 and done < total):
            return
        width = 30
        filled = width if done >= total else done * width // total
        self._stream.write(f"\r\033[K[{'#' * filled}{' ' * (width - filled)}] {done}/{total} {self._unit}, "
                           f"{now - self._start:.0f} s")
        self._stream.flush()
        self._drawn = True
        self._last = now

    def close(self) -> None:
        """Erases the bar, if drawn."""
        if self._drawn:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._drawn = False


def on_terminal(unit: str):
    """A Bar on standard error when it is a terminal, else None."""
    stream = sys.stderr
    try:
        terminal = stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        terminal = False
    return Bar(unit, stream) if terminal else None
