"""pfx's refusals of what it cannot vouch for (a configuration, an engine version, a model kind), as
``pfx.Refused``, the package's one refusal type: both a ValueError (the machine's refusal of an event,
as the drop-in's callers catch it) and a RuntimeError (as an integration's callers catch it). Its
``.refusal`` names the kind of refusal, as the machine's name theirs."""
from __future__ import annotations

from ._native import Refused

CONFIGURATION = "configuration"
"""The ``.refusal`` of a configuration, option or model an integration cannot vouch for."""
UNTESTED_VERSION = "untested version"
"""The ``.refusal`` of an engine version an integration was not tested with."""


def refused(message: str, refusal: str = CONFIGURATION) -> Refused:
    """``pfx.Refused(message)`` with ``.refusal`` set, to raise."""
    error = Refused(message)
    error.refusal = refusal
    return error
