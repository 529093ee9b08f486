"""The AI core: model routing with fallback chains, the streaming chat call, tools and their
records, the offline default agent and an OpenAI-compatible front door (see docs/ai-core.md).

Other plugins in the ai-core service add tools through the `tools` service:

    context.services.require("tools").add(name, description, parameters, handler,
                                          owner="my_plugin", examples={"en": [...], "zh": [...]})
"""
from __future__ import annotations

import logging
from typing import AsyncIterator

from gateway.plugins import Plugin, Registrar

from . import store
from .api import ENGINE_SERVICE, routes
from .builtin_tools import register_builtin_tools
from .engine import Engine
from .probe import routes as probe_routes
from .tools import ToolRegistry

log = logging.getLogger("plugins.ai_core")


class AiCorePlugin(Plugin):
    name = "ai_core"
    depends = ("auth_tokens",)
    uses = ("database",)
    description = "model routing with fallback, the SSE chat call, tools, the offline agent, /v1 door"

    def setup(self, registrar: Registrar) -> None:
        context = registrar.context
        settings = dict(registrar.settings)
        registry = ToolRegistry()
        register_builtin_tools(registry, str(settings.get("timezone") or ""))
        engine = Engine(context, registry, settings)
        registrar.migrations("plugins.ai_core")
        registrar.routes(routes)
        registrar.routes(probe_routes)
        registrar.provide("tools", registry)
        registrar.provide(ENGINE_SERVICE, engine)

        async def seed(context) -> AsyncIterator[None]:
            base_url = context.config.get("models.openai_base_url")
            if base_url:
                seeded = await store.seed_from_environment(
                    context.db, base_url, context.config.get("models.openai_api_key") or "",
                    context.config.get("models.default_model") or "")
                if seeded:
                    log.info("seeded the provider 'openai' and the chat route from the environment")
            yield

        registrar.lifespan(seed)


plugin = AiCorePlugin()
