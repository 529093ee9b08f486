"""What the platform bridge keeps of a person, for deleting them (auth contract `PERSON_DATA`,
asked by the gateway through GET/DELETE /api/v1/people/{user_id}/data): their linked
chat-platform accounts, link codes and chats."""
from __future__ import annotations

from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter, row_eraser


def register(registrar: Registrar) -> None:
    keep_person_data(registrar, "platform_bridge", row_counter(registrar, {"platform_links": "bridge_users"}),
                     row_eraser(registrar, ["bridge_users", "bridge_link_codes", "bridge_chats"]))
