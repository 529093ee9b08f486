"""The AI core, and the client other services call it with: two plugins in one package.

- `ai_core` (the ai-core service): model routing with fallback chains, the streaming chat call,
  tools and their records, the offline default agent and an OpenAI-compatible front door (see
  docs/ai-core.md). Other plugins of that service add tools through the `TOOLS` contract, and
  hook into every chat turn through `TURN_CONTEXT` (blocks for the system message before it)
  and `TURN_FINISHED` (told after it). Tools:

      context.contracts.require(TOOLS).add(name, description, parameters, handler,
                                            owner="my_plugin", examples={"en": [...], "zh": [...]})

- `ai_core_client` (the gateway): the `AI_CORE` contract, the one client of the AI core's HTTP
  API (the chat stream, image descriptions, the model tables).

Both contracts are in `plugins.ai_core.contract`."""
from __future__ import annotations

import logging
from typing import AsyncIterator

import aiohttp

from gateway.context import Context
from gateway.fetch import RESOLVER, guarded_session
from gateway.plugins import Plugin, Registrar
from plugins.auth.contract import keep_peer_person_data

from . import store
from .api import ENGINE, routes
from .builtin_tools import register_builtin_tools
from .client import AiCoreClient
from .completions import PurposeCompletions
from .door import routes as door_routes
from .door_media import routes as door_media_routes
from .contract import AI_CORE, MODELS, TOOLS, TURN_CONTEXT, TURN_FINISHED
from .engine import Engine
from .person_data import register as register_person_data
from .mcp_servers_api import setup_mcp
from .peer import GatewayPeer
from .probe import routes as probe_routes
from .providers import model_policy
from .routing import ROUTING_CHANGED
from .settings import AiCoreClientSettings, AiCoreSettings
from .tools import ToolRegistry

log = logging.getLogger("plugins.ai_core")


class AiCorePlugin(Plugin):
    name = "ai_core"
    depends = ("auth_tokens",)
    uses = ("database", "embeddings")  # embeddings: `/v1/embeddings` (loaded on its first use)
    description = "model routing with fallback, the SSE chat call, tools, the offline agent, /v1 door"
    settings_class = AiCoreSettings
    # The model an operator names at start-up, seeded into the model tables (providers.py).
    environment = {"OPENAI_BASE_URL": ("plugins.ai_core.openai_base_url", str),
                   "OPENAI_API_KEY": ("plugins.ai_core.openai_api_key", str),
                   "DEFAULT_MODEL": ("plugins.ai_core.default_model", str)}
    # Release 0.1.0 kept these in the core's [models] and [fetch] sections, where a configuration
    # file from then still has them.
    former_settings = {**{f"models.{key}": f"plugins.ai_core.{key}"
                          for key in ("openai_base_url", "openai_api_key", "default_model")},
                       "fetch.mcp_hosts": "plugins.ai_core.mcp_hosts"}

    def setup(self, registrar: Registrar[AiCoreSettings]) -> None:
        context = registrar.context
        settings = registrar.settings
        registry = ToolRegistry()
        register_builtin_tools(registry, settings.timezone)
        engine = Engine(context, registry, settings, GatewayPeer(context, settings.tool_timeout))
        registrar.migrations("plugins.ai_core")
        registrar.routes(routes)
        registrar.routes(probe_routes)
        registrar.routes(door_routes)
        registrar.routes(door_media_routes)
        registrar.provide(TOOLS, registry)
        registrar.report("tools", lambda: registry.names_by_owner(self.name))
        registrar.provide(TURN_CONTEXT, engine.turn_context)
        registrar.provide(TURN_FINISHED, engine.turn_finished)
        registrar.provide(ENGINE, engine)
        registrar.provide(MODELS, PurposeCompletions(engine))
        setup_mcp(registrar, registry)
        register_person_data(registrar)

        async def seed(context: Context) -> AsyncIterator[None]:
            if settings.openai_base_url:
                seeded = await store.seed_from_environment(
                    context.db, settings.openai_base_url, settings.openai_api_key, settings.default_model)
                if seeded:
                    log.info("seeded the provider 'openai' and the chat route from the environment")
                    engine.routing.forget()
            yield

        async def routing_changes(context: Context) -> AsyncIterator[None]:
            # Another instance's admin edit drops this one's copy of the routing tables (routing.py).
            subscription = await context.bus.subscribe(ROUTING_CHANGED, engine.routing.on_changed)
            context.bus.on_restored(engine.routing.on_bus_restored)
            try:
                yield
            finally:
                await subscription.close()

        async def model_connections(context: Context) -> AsyncIterator[None]:
            # Not the service's own session: that one reaches the peers (trusted configuration);
            # providers are reached only where the egress policy for models allows.
            engine.models_http = guarded_session(
                model_policy(context.config, settings), resolver=context.contracts.get(RESOLVER),
                limit=context.config.settings.core.http_connection_limit,
                timeout=aiohttp.ClientTimeout(total=None, connect=10))
            try:
                yield
            finally:
                await engine.models_http.close()

        registrar.lifespan(seed)
        registrar.lifespan(routing_changes)
        registrar.lifespan(model_connections)


class AiCoreClientPlugin(Plugin):
    name = "ai_core_client"
    description = "The client of the AI core: chat stream, image descriptions, model tables"
    optional_depends = ("auth_tokens",)
    settings_class = AiCoreClientSettings

    def setup(self, registrar: Registrar[AiCoreClientSettings]) -> None:
        client = AiCoreClient(registrar.context, registrar.settings)
        registrar.provide(AI_CORE, client)
        # What the AI core keeps of a person goes when the administrator deletes them.
        keep_peer_person_data(registrar, "ai_core", client)


plugin = AiCorePlugin()
client_plugin = AiCoreClientPlugin()
