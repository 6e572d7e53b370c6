"""The two ways a check ends without a verdict, shared by every check of pfx's Python side (this
package's, and ``pfx.integrations.vllm.conform``'s)."""
from __future__ import annotations


class BadInput(ValueError):
    """The check cannot run as asked: an option, a trace, a model or a server it cannot use, named.
    Exit status 2."""


class CheckError(RuntimeError):
    """The check could not do what it says (an engine did not take the cached tokens it was led to, a
    cold run was not cold, a reset did not happen): no verdict, never a pass. Exit status 3."""
