"""What the notifications plugin keeps of a person (notifications, devices, push subscriptions),
for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import execute, fetch_required
from gateway.plugins import Registrar
from gateway.peers import PeerClient
from plugins.auth.contract import PERSON_DATA, add_peer_person_data


def register(registrar: Registrar, bridge: PeerClient) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return

    async def count(user_id: str) -> dict[str, int]:
        row = await fetch_required(
            registrar.context.db,
            "SELECT (SELECT count(*) FROM notifications WHERE user_id = %s) AS notifications,"
            " (SELECT count(*) FROM push_subscriptions WHERE user_id = %s) AS subscriptions", (user_id, user_id))
        return {"notifications": int(row["notifications"]), "push_subscriptions": int(row["subscriptions"])}

    async def erase(user_id: str) -> None:
        for table in ("notifications", "notification_devices", "push_subscriptions"):
            await execute(registrar.context.db, f"DELETE FROM {table} WHERE user_id = %s", (user_id,))

    person_data.add("notifications", count, erase)
    # The chat-platform accounts a person linked, kept by the platform bridge (the notifications
    # plugin is the gateway's client of it), where this deployment names one (PLATFORM_BRIDGE_URL):
    # the bridge is optional, and a table port nobody serves would refuse every deletion.
    if registrar.context.config.get("peers.platform_bridge_url"):
        add_peer_person_data(person_data, "platform_bridge", bridge)
