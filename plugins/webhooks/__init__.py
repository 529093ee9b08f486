"""Webhooks: other systems and chat platforms talk to the assistant over plain HTTP.

- `POST /api/v1/webhook/generic` (header `X-Webhook-Key`) — one message in, the AI core's whole
  reply out;
- `POST /api/v1/webhook/discord` — Discord's interactions endpoint: PING and the chat command,
  with Discord's Ed25519 request signature checked against `DISCORD_PUBLIC_KEY`; a reply slower
  than Discord's 3 seconds is deferred and sent through the interaction's follow-up webhook;
- `POST /api/v1/bridge/turns` — the platform bridge's turns for gateway users, streamed back
  (service credential).

Each message is a chat turn (the chat plugin's `CHAT_TURNS.submit_and_wait`): under the
session's turn lock like a device's message, stored in the conversations store under the `ext_`
user, so it shows up in the sessions endpoints like any other conversation. See
docs/webhooks.md."""
from __future__ import annotations

import secrets

from gateway.plugins import Plugin, PluginError, Registrar

from aiohttp import web

from .api import WEBHOOKS, WebhookConfig, check_key, parse_discord_key, routes
from .bridge import routes as bridge_routes
from .contract import WEBHOOK_KEY
from .settings import WebhooksSettings


class WebhookKeyCheck:
    """The `WEBHOOK_KEY` contract: the very check the webhook endpoints make."""

    def present(self, request: web.Request) -> bool:
        return "X-Webhook-Key" in request.headers

    def check(self, request: web.Request) -> None:
        check_key(request)


class WebhooksPlugin(Plugin):
    name = "webhooks"
    depends = ("sessions", "chat")
    description = "Generic and Discord webhooks answered as chat turns"
    settings_class = WebhooksSettings
    environment = {"WEBHOOK_KEY": ("plugins.webhooks.webhook_key", str),
                   "DISCORD_PUBLIC_KEY": ("plugins.webhooks.discord_public_key", str)}
    generated_secrets = {"plugins.webhooks.webhook_key": lambda: secrets.token_urlsafe(24)}
    # Release 0.1.0 kept these in [auth]: a configuration file or a DATA_DIR/secrets.json (and a
    # backup of it) from then still holds them there.
    former_settings = {"auth.webhook_key": "plugins.webhooks.webhook_key",
                       "auth.discord_public_key": "plugins.webhooks.discord_public_key"}

    def setup(self, registrar: Registrar[WebhooksSettings]) -> None:
        settings = registrar.settings
        try:
            discord_key = parse_discord_key(settings.discord_public_key)
        except ValueError:
            raise PluginError("webhooks: DISCORD_PUBLIC_KEY must be the 64 hex digits of the "
                              "application's public key (Discord developer portal)") from None
        registrar.app_state(WEBHOOKS, WebhookConfig(webhook_key=settings.webhook_key,
                                                    discord_key=discord_key,
                                                    ai_timeout=settings.ai_timeout,
                                                    discord_defer_after=settings.discord_defer_after,
                                                    discord_api_url=settings.discord_api_url,
                                                    max_message_chars=settings.max_message_chars))
        registrar.routes(routes)
        registrar.routes(bridge_routes)  # the platform bridge's turns (bridge.py)
        registrar.provide(WEBHOOK_KEY, WebhookKeyCheck())


plugin = WebhooksPlugin()
