"""What the notifications plugin keeps of a person (notifications, devices, push subscriptions),
for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.peers import PeerClient
from gateway.plugins import Registrar
from plugins.auth.contract import keep_peer_person_data, keep_person_data, row_counter, row_eraser


def register(registrar: Registrar, bridge: PeerClient) -> None:
    keep_person_data(registrar, "notifications",
                     row_counter(registrar, {"notifications": "notifications",
                                             "push_subscriptions": "push_subscriptions"}),
                     row_eraser(registrar, ["notifications", "notification_devices", "push_subscriptions"]))
    # The chat-platform accounts a person linked, kept by the platform bridge (the notifications
    # plugin is the gateway's client of it), where this deployment names one (PLATFORM_BRIDGE_URL):
    # the bridge is optional, and a table port nobody serves would refuse every deletion.
    if registrar.context.config.settings.peers.platform_bridge_url:
        keep_peer_person_data(registrar, "platform_bridge", bridge)
