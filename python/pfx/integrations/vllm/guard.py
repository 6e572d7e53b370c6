"""Stops a vLLM that runs without pfx's plugin while PFX_VLLM asks for it (docs/engines.md, "vLLM").

vLLM loads plugins only through ``vllm.plugins.load_general_plugins``, which skips any plugin that
``VLLM_PLUGINS`` does not name and goes on when one fails to import: with ``PFX_VLLM=1`` and
``VLLM_PLUGINS=other``, vLLM would serve stock while its user believes pfx on. pfx's distribution
installs ``pfx-vllm-guard.pth`` into site-packages; Python reads it at start-up, and where
``PFX_VLLM`` is set it imports this module, which watches for ``vllm.plugins`` to be imported and
has its ``load_general_plugins`` call ``pfx.integrations.vllm.check_loaded()`` afterwards: the start
stops there with a ``pfx.ConfigError`` that says why, before any model loads. Without ``PFX_VLLM``
the .pth line does nothing but read the environment; this module imports nothing of vLLM's.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys

WATCHED = "vllm.plugins"


def _checked(load_general_plugins):
    @functools.wraps(load_general_plugins)
    def checked():
        load_general_plugins()
        from pfx.integrations import vllm as plugin
        plugin.check_loaded()
    checked.pfx_checked = True
    return checked


def guard(module) -> None:
    """Makes `module` (vllm.plugins) check, after loading vLLM's plugins, that pfx's is among them."""
    if not getattr(module.load_general_plugins, "pfx_checked", False):
        module.load_general_plugins = _checked(module.load_general_plugins)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        guard(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds vllm.plugins as the other finders do, and guards it once it has run."""

    def find_spec(self, name, path=None, target=None):
        if name != WATCHED:
            return None
        sys.meta_path.remove(self)  # the real finders find it; this one is needed once
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Guards vllm.plugins: now if it is imported already, else when it is."""
    module = sys.modules.get(WATCHED)
    if module is not None:
        guard(module)
    elif not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
