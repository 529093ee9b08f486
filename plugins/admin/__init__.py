"""Administration (`/api/v1/admin/*`, administrator only): live sessions and known clients from
the chat plugin's `presence` service, and the AI core's providers, models and routing rules,
validated here and kept there. See docs/admin.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from .ai_core import AiCoreClient
from .settings import AdminSettings
from .api import AdminApi


class AdminPlugin(Plugin):
    name = "admin"
    depends = ("auth_tokens",)
    description = "Administrator endpoints: live sessions, known clients, model providers, models, routing"
    settings_schema = AdminSettings

    def setup(self, registrar: Registrar) -> None:
        settings = registrar.settings
        ai_core = AiCoreClient(registrar.context, registrar.context.peer_url("ai_core") or "http://127.0.0.1:8081")
        api = AdminApi(registrar.context, ai_core,
                       health_check_timeout=settings["health_check_timeout"],
                       fetch_timeout=settings["fetch_models_timeout"])
        registrar.routes(api.routes())


plugin = AdminPlugin()
