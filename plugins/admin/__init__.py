"""Administration (`/api/v1/admin/*`, administrator only): live sessions and known clients from
the chat plugin's `presence` service, and the AI core's providers, models and routing rules,
validated here and kept there (reached through the `AI_CORE` client). See docs/admin.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import AI_CORE

from .api import AdminApi
from .settings import AdminSettings


class AdminPlugin(Plugin):
    name = "admin"
    depends = ("auth_tokens", "ai_core_client")
    description = "Administrator endpoints: live sessions, known clients, model providers, models, routing"
    settings_schema = AdminSettings

    def setup(self, registrar: Registrar) -> None:
        settings = registrar.settings
        api = AdminApi(registrar.context, registrar.context.contracts.require(AI_CORE),
                       health_check_timeout=settings["health_check_timeout"],
                       fetch_timeout=settings["fetch_models_timeout"])
        registrar.routes(api.routes())


plugin = AdminPlugin()
