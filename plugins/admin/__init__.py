"""Administration (`/api/v1/admin/*`, administrator only): live sessions and known clients from
the chat plugin's `presence` service, and the AI core's providers, models and routing rules,
validated here and kept there (reached through the `AI_CORE` client). See docs/admin.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from . import model_catalog, provider_checks, sessions
from .provider_checks import TIMEOUTS, ProviderTimeouts
from .settings import AdminSettings


class AdminPlugin(Plugin):
    name = "admin"
    depends = ("auth_tokens", "ai_core_client")
    # Without chat there is no presence: the session and client listings answer empty.
    # Without sessions there are no stored totals: /stats answers 503.
    optional_depends = ("chat", "sessions")
    description = "Administrator endpoints: live sessions, known clients, model providers, models, routing"
    settings_class = AdminSettings

    def setup(self, registrar: Registrar[AdminSettings]) -> None:
        settings = registrar.settings
        registrar.app_state(TIMEOUTS, ProviderTimeouts(health_check=settings.health_check_timeout,
                                                       fetch_models=settings.fetch_models_timeout))
        registrar.routes(sessions.routes)
        registrar.routes(model_catalog.routes)
        registrar.routes(provider_checks.routes)


plugin = AdminPlugin()
