"""The assistant's core: application factory, configuration, plugin loading and the shared
context. It knows no feature; every feature is a plugin (see docs/plugins.md).

The names below are imported when first asked for: importing a module of the core (the
`gateway` command, the parent of several workers) does not build the whole service (its
plugins' machinery, the database driver, marshmallow: about 10 MB the workers' parent never
used)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .app import create_app
    from .config import Config
    from .plugins import Plugin, Registrar

__all__ = ["create_app", "Config", "Plugin", "Registrar", "__version__"]
_LAZY = {"create_app": "app", "Config": "config", "Plugin": "plugins", "Registrar": "plugins"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
