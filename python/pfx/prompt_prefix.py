"""The original Python class PromptPrefix on top of pfx.Machine (chunk 1, the original's rule).

Same attributes (ids, canonical_end, enabled), methods (offset_for, record, clear), environment
variables and defaults. Where the original misbehaves this class raises an error that names the
problem and changes nothing; docs/python.md lists every difference.
"""
from __future__ import annotations

import copy
import operator

import pfx

from ._native import Config, ConfigError, Machine


def _keep_min() -> int:
    """The module's KEEP_MIN now: like the seed, offset_for reads the module attribute at call time,
    so assigning pfx.KEEP_MIN takes effect at once."""
    value = pfx.KEEP_MIN  # a malformed TF_GLM53_PREFIX_CACHE_MIN raises ConfigError here
    try:
        value = operator.index(value)
    except TypeError:
        raise ConfigError(f"pfx.KEEP_MIN must be a non-negative integer, not {value!r}") from None
    if value < 0:
        # The seed would answer -1 for an empty prompt: an offset is never negative.
        raise ConfigError(f"pfx.KEEP_MIN must be a non-negative integer, not {value!r}")
    return value


class PromptPrefix:
    """What the shared KV state holds: the committed ids and canonical_end, from the last request to
    fill it. A drop-in for the original class; copy.copy, copy.deepcopy and pickle give independent,
    equal objects."""

    # No other attributes: assigning a misspelt one (p.enable = False) would otherwise do nothing.
    __slots__ = ("_machine",)

    def __init__(self) -> None:
        # Read like the seed's, from the module's attributes; a malformed variable is a ConfigError.
        enabled = bool(pfx.TF_PREFIX_CACHE)
        self._machine = Machine(Config(enabled=enabled, keep_min=_keep_min(), chunk=1))

    @property
    def ids(self) -> "pfx.Ids":
        """The ids held, as a read-only view in O(1) (pfx.Ids): len, index, slices, iteration, == with
        a list, and the buffer protocol (int32, no copy). list(p.ids) is a copy."""
        return self._machine.ids

    @ids.setter
    def ids(self, _value) -> None:
        raise AttributeError("PromptPrefix.ids is read-only: publish with record(ids, canonical_end)")

    @ids.deleter
    def ids(self) -> None:
        raise AttributeError("PromptPrefix.ids is read-only: forget the record with clear()")

    @property
    def canonical_end(self) -> int:
        """The last request's prompt length: rows from here on were written by decode (audit 260)."""
        return self._machine.canonical_end

    @canonical_end.setter
    def canonical_end(self, _value) -> None:
        raise AttributeError("PromptPrefix.canonical_end is read-only: publish with record(ids, canonical_end)")

    @canonical_end.deleter
    def canonical_end(self) -> None:
        raise AttributeError("PromptPrefix.canonical_end is read-only: forget the record with clear()")

    @property
    def enabled(self) -> bool:
        """Whether reuse is on (TF_GLM53_PREFIX_CACHE). Setting False forgets the record."""
        return self._machine.config.enabled

    @enabled.setter
    def enabled(self, value) -> None:
        # Turning reuse off forgets the record: while off the KV state is still written but nothing is
        # recorded, so the old record would be stale when reuse is turned back on (audit 253).
        config = self._machine.config
        config.enabled = bool(value)
        self._machine.configure(config)

    def offset_for(self, prompt) -> int:
        """The number of leading prompt tokens already valid in the KV state; 0 when nothing may be
        reused. prompt: a list (or any iterable) of token ids, or a buffer of integers (array.array,
        numpy array, memoryview), read only up to the first id that differs from the record."""
        keep_min = _keep_min()
        if self._machine.config.keep_min != keep_min:
            self._machine.configure(Config(enabled=self.enabled, keep_min=keep_min, chunk=1))
        return self._machine.query(prompt).offset

    def record(self, ids, canonical_end) -> None:
        """Publish the record: ids = prompt + generated, canonical_end = len(prompt). Stores nothing
        while disabled, but refuses a bad argument either way (pfx.Refused when canonical_end >
        len(ids), TypeError, ValueError or OverflowError naming a bad value; token ids are integers
        in 0..2147483647). Unchecked, as the original's: the caller vouches that the state holds a cold
        prefill of ids[0:canonical_end)."""
        self._machine.record(ids, canonical_end)

    def clear(self) -> None:
        """Forget the record (ids and canonical_end)."""
        self._machine.clear()

    def __repr__(self) -> str:
        return (f"PromptPrefix(len(ids)={len(self._machine.ids)}, canonical_end={self.canonical_end}, "
                f"enabled={self.enabled})")

    def __eq__(self, other):
        if not isinstance(other, PromptPrefix):
            return NotImplemented
        return self._machine == other._machine

    __hash__ = None  # mutable

    # copy and pickle: an independent machine with the same state (never the same one).
    def __getstate__(self):
        return self._machine

    def __setstate__(self, machine) -> None:
        if not isinstance(machine, Machine):
            raise TypeError(f"not the state of a pickled pfx.PromptPrefix: {type(machine).__name__}")
        self._machine = machine

    def __copy__(self) -> "PromptPrefix":
        twin = type(self).__new__(type(self))
        twin._machine = copy.copy(self._machine)
        return twin

    def __deepcopy__(self, memo) -> "PromptPrefix":
        return self.__copy__()
