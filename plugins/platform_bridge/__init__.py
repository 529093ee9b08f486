"""The platform bridge: bots on Telegram, Discord and a generic signed webhook, each
conversation relayed into the gateway as the person's own session. See docs/platform-bridge.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from .api import routes
from .bridge import Bridge
from .keys import BRIDGE
from .person_data import register as register_person_data
from .settings import BridgeSettings


class PlatformBridgePlugin(Plugin):
    name = "platform_bridge"
    depends = ("auth_tokens",)
    uses = ("database",)
    description = "Chat platform bots (Telegram, Discord, generic webhook) relayed into the gateway"
    settings_class = BridgeSettings

    def setup(self, registrar: Registrar[BridgeSettings]) -> None:
        # Redacted: a failed poller's exception may hold a Telegram URL, which carries the bot's token.
        pollers = registrar.job_group("telegram_pollers", per="bot", redact=True)
        bridge = Bridge(registrar.context, registrar.settings, pollers)
        registrar.migrations("plugins.platform_bridge")
        registrar.app_state(BRIDGE, bridge)
        registrar.routes(routes)
        registrar.lifespan(bridge.lifespan)
        register_person_data(registrar)


plugin = PlatformBridgePlugin()
