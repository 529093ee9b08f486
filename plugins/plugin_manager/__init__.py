"""The plugin manager (the `plugin-manager` service): which plugins are installed in this
environment, which services load them and what each running service really loaded (each
service's `GET /api/v1/introspection`), and enabling or disabling a plugin for a service. See
docs/plugin-manager.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from .api import MANAGER, routes
from .manager import Manager
from .settings import PluginManagerSettings


class PluginManagerPlugin(Plugin):
    name = "plugin_manager"
    depends = ("auth_tokens",)
    description = "Installed plugins, what every service loaded, enabling and disabling them per service"
    settings_class = PluginManagerSettings

    def setup(self, registrar: Registrar[PluginManagerSettings]) -> None:
        registrar.app_state(MANAGER, Manager(registrar.context, registrar.settings))
        registrar.routes(routes)


plugin = PluginManagerPlugin()
