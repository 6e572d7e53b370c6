"""The old names of modules that moved, in one table, kept working until pfx REMOVED_IN: importing an
old name gives the module under its new name (the same object, so its classes are the new module's)
and warns (DeprecationWarning); ``python -m OLD`` runs the new module as ``python -m NEW`` does, and
warns. Installed by ``pfx.integrations`` (a meta path finder), which Python imports before any of its
modules, old names included."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

REMOVED_IN = "0.2.0"
ALIASES = {
    # The fixtures, apart from the adapters since 0.1.0.
    "pfx.integrations.tiny_gguf": "pfx.fixtures.tiny_gguf",
    "pfx.integrations.tiny_llama": "pfx.fixtures.tiny_llama",
    "pfx.integrations.workloads": "pfx.fixtures.workloads",
    # One package per engine.
    "pfx.integrations.vllm_conform": "pfx.integrations.vllm.conform",
    "pfx.integrations.vllm_verify": "pfx.verify_server",
    "pfx.integrations.vllm_guard": "pfx.integrations.vllm.guard",
    "pfx.integrations.llama_cpp_rule": "pfx.integrations.llama_cpp.rule",
    "pfx.integrations.llama_cpp_server": "pfx.integrations.llama_cpp.server",
    # One check for every server since 0.1.0.
    "pfx.integrations.vllm.verify": "pfx.verify_server",
    "pfx.integrations.llama_cpp.verify": "pfx.verify_server",
}


def message(old: str) -> str:
    return f"{old} is now {ALIASES[old]}; the old name is removed in pfx {REMOVED_IN}"


class _Alias(importlib.abc.Loader):
    """Loads an old name as its new module, and runs it under ``python -m``."""

    def __init__(self, old: str):
        self.old = old

    def create_module(self, spec):
        warnings.warn(message(self.old), DeprecationWarning, stacklevel=2)
        return importlib.import_module(ALIASES[self.old])

    def exec_module(self, module) -> None:
        pass  # the new module ran when it was imported

    def get_code(self, fullname):
        """What ``python -m OLD`` runs: the new module as __main__, within its own package, so that its
        relative imports resolve as they do under ``python -m NEW``."""
        return compile(f"import runpy, warnings\n"
                       f"warnings.warn({message(self.old)!r}, DeprecationWarning)\n"
                       f"runpy.run_module({ALIASES[self.old]!r}, run_name='__main__', alter_sys=True)\n",
                       f"<{fullname}: an alias of {ALIASES[self.old]}>", "exec")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in ALIASES:
            return None
        return importlib.machinery.ModuleSpec(name, _Alias(name))


def install() -> None:
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
