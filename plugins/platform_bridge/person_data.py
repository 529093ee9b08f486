"""What the platform bridge keeps of a person, for deleting them (auth contract `PERSON_DATA`,
asked by the gateway through GET/DELETE /api/v1/people/{user_id}/data): their linked
chat-platform accounts, link codes and chats."""
from __future__ import annotations

from gateway.database import execute, fetch_value
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA


def register(registrar: Registrar) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return
    context = registrar.context

    async def count(user_id: str) -> dict[str, int]:
        links = await fetch_value(context.db, "SELECT count(*) FROM bridge_users WHERE user_id = %s", (user_id,))
        return {"platform_links": int(links or 0)}

    async def erase(user_id: str) -> None:
        for table in ("bridge_users", "bridge_link_codes", "bridge_chats"):
            await execute(context.db, f"DELETE FROM {table} WHERE user_id = %s", (user_id,))

    person_data.add("platform_bridge", count, erase)
