"""pfx: how much of a new prompt an LLM serving lane may reuse from the KV state it holds.

``PromptPrefix`` is a drop-in for the original Python class of the same name; ``Machine`` is the
whole protocol (query, begin, commit, abort, record, clear, configure) of pfx::core, and
``Machine.write`` the same protocol as a context manager; ``conform`` checks an engine written in
Python (docs/conform.md); ``Lane`` serves requests on one through the C++ lane, and ``verify`` checks
it end to end (adapters for engines people run: ``pfx.integrations``). Token ids are integers in 0..2147483647;
token sequences are lists, any iterable of integers, or buffers of integers (array.array, numpy
arrays, memoryview: read in place). ``ids`` are read-only views (``Ids``). See docs/python.md.

Like the original, the module reads TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN at import into
``TF_PREFIX_CACHE`` and ``KEEP_MIN``. A malformed value does not make the import fail (``Machine``
needs neither): reading the attribute, or constructing a ``PromptPrefix``, raises ``ConfigError``
naming the variable.
"""
from __future__ import annotations

import os as _os

import collections.abc as _abc

from ._native import (Bound, Config, ConfigError, ConformColdDisagreement, ConformDifference, ConformGrid,
                      ConformMismatch, ConformPremiseFailure, ConformReport, Decision, Ids, Lane, Machine, Phase,
                      Reason, Refused, Response, VerifyMismatch, VerifyReport, common_prefix, conform, decide,
                      prefill_canonical_end, verify)
from ._native import apply_environment as _apply_environment
from ._write import Write, write as _write

Machine.write = _write


def _restore_machine(state) -> Machine:
    """Unpickles a Machine (its __reduce__): every pickle protocol, 0 included."""
    machine = Machine.__new__(Machine)
    machine.__setstate__(state)
    return machine


Machine.__reduce__ = lambda self: (_restore_machine, (self.__getstate__(),))
_abc.Sequence.register(Ids)

__all__ = ["Bound", "Config", "ConfigError", "ConformColdDisagreement", "ConformDifference", "ConformGrid",
           "ConformMismatch", "ConformPremiseFailure", "ConformReport", "Decision", "Ids", "Lane", "Machine", "Phase",
           "PromptPrefix", "Reason", "Refused", "Response", "VerifyMismatch", "VerifyReport", "Write", "common_prefix",
           "config_from_environment", "conform", "decide", "prefill_canonical_end", "verify", "KEEP_MIN", "TF_PREFIX_CACHE"]


def config_from_environment(environ=None) -> Config:
    """Config(chunk=1) with TF_GLM53_PREFIX_CACHE and TF_GLM53_PREFIX_CACHE_MIN of ``environ``
    (default: os.environ) applied; a malformed value raises ConfigError naming the variable."""
    environ = _os.environ if environ is None else environ
    return _apply_environment(Config(), environ.get("TF_GLM53_PREFIX_CACHE"),
                              environ.get("TF_GLM53_PREFIX_CACHE_MIN"))


# The original module's attributes, read at import. Each variable is read on its own, so that a malformed
# one does not hide the other; its error is kept and raised when the attribute is read (__getattr__).
_environment_errors: dict = {}


def _read_environment() -> None:
    values = {
        "TF_PREFIX_CACHE": lambda: _apply_environment(
            Config(), _os.environ.get("TF_GLM53_PREFIX_CACHE"), None).enabled,
        "KEEP_MIN": lambda: _apply_environment(
            Config(), None, _os.environ.get("TF_GLM53_PREFIX_CACHE_MIN")).keep_min,
    }
    _environment_errors.clear()
    for name, read in values.items():
        try:
            globals()[name] = read()
        except ConfigError as error:
            # Reached again only when the module is reloaded: the old value must not survive.
            globals().pop(name, None)
            _environment_errors[name] = str(error)


def __getattr__(name: str):
    if name in _environment_errors:
        raise ConfigError(_environment_errors[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_read_environment()

from .prompt_prefix import PromptPrefix  # noqa: E402  (it reads the attributes above at call time)
