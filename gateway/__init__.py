"""The assistant's core: application factory, configuration, plugin loading and the shared
context. It knows no feature; every feature is a plugin (see docs/plugins.md)."""
from .version import __version__  # noqa: E402
from .app import create_app  # noqa: E402
from .config import Config  # noqa: E402
from .plugins import Plugin, Registrar  # noqa: E402

__all__ = ["create_app", "Config", "Plugin", "Registrar", "__version__"]
