"""The old name of ``pfx.fixtures.workloads`` (multi-turn chat workloads, of token ids and of text),
kept so that code written against it still runs: the fixture lives there now, with the others, apart
from the adapters. This name gives the same objects, and warns (DeprecationWarning) when imported."""
import warnings

from ..fixtures.workloads import *  # noqa: F401,F403  every public name, the same object

warnings.warn("pfx.integrations.workloads is now pfx.fixtures.workloads", DeprecationWarning, stacklevel=2)
