"""What is installed: every plugin published under the `gateway.plugins` entry-point group,
with its distribution, version, dependencies, whether configuration enables it and which
services load it per the service table. The one list `gateway plugins` prints and the plugin
manager serves, so the two cannot disagree. Blocking (it imports the plugins): run it in an
executor from a service."""
from __future__ import annotations

import importlib.metadata
from collections import Counter
from dataclasses import dataclass, field

from .config import Config
from .plugins import Plugin, PluginError, installed_entry_points, load_entry_point
from .services import ServiceSpec


@dataclass
class InstalledPlugin:
    name: str
    distribution: str
    version: str
    description: str = ""
    depends: list[str] = field(default_factory=list)
    optional_depends: list[str] = field(default_factory=list)
    enabled: bool = False
    services: list[str] = field(default_factory=list)  # ids of the services whose table row names it
    # Why it could not be loaded ({"type", "message"}), or None.
    error: dict[str, str] | None = None
    plugin: Plugin | None = field(default=None, repr=False, compare=False)

    def summary(self) -> dict:
        """The JSON form, without the plugin object."""
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "description": self.description, "depends": self.depends,
                "optional_depends": self.optional_depends, "enabled": self.enabled,
                "services": self.services, "error": self.error}


def error_summary(error: Exception) -> dict[str, str]:
    """The error a plugin failed with, as type and message: the original exception when loading
    wrapped it (a ModuleNotFoundError, not our PluginError around it)."""
    cause = error.__cause__ if isinstance(error, PluginError) and error.__cause__ is not None else error
    return {"type": type(cause).__name__, "message": str(cause)}


def installed_plugin_list(config: Config, specs: list[ServiceSpec],
                          distribution: str | None = None) -> list[InstalledPlugin]:
    """Every installed plugin (only `distribution`'s when given), sorted by name; one that fails
    to import is listed with its error instead of stopping the list."""
    entry_points = [entry_point for entry_point in installed_entry_points()
                    if distribution is None or _distribution_name(entry_point) == distribution]
    published = Counter(entry_point.name for entry_point in entry_points)
    rows = []
    for entry_point in sorted(entry_points, key=lambda e: (e.name, _distribution_name(e))):
        dist = entry_point.dist
        row = InstalledPlugin(name=entry_point.name, distribution=_distribution_name(entry_point),
                              version=dist.version if dist is not None else "",
                              services=[spec.id for spec in specs if entry_point.name in spec.plugins])
        rows.append(row)
        if published[entry_point.name] > 1:
            row.error = {"type": "PluginError", "message": f"two installed distributions publish a plugin "
                                                           f"named {entry_point.name!r}"}
            continue
        try:
            plugin = load_entry_point(entry_point)
            row.enabled = bool(plugin.enabled(config))
        except Exception as error:  # the list must show a broken plugin, not stop at it
            row.error = error_summary(error)
            continue
        row.plugin = plugin
        row.version = plugin.version
        row.description = plugin.description
        row.depends = list(plugin.depends)
        row.optional_depends = list(plugin.optional_depends)
    return rows


def _distribution_name(entry_point: importlib.metadata.EntryPoint) -> str:
    return entry_point.dist.name if entry_point.dist is not None else ""
