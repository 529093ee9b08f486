"""What the reminders plugin keeps of a person, for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import execute, fetch_value
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA


def register(registrar: Registrar) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return

    async def count(user_id: str) -> dict[str, int]:
        total = await fetch_value(registrar.context.db, "SELECT count(*) FROM reminders WHERE user_id = %s", (user_id,))
        return {"reminders": int(total or 0)}

    async def erase(user_id: str) -> None:
        await execute(registrar.context.db, "DELETE FROM reminders WHERE user_id = %s", (user_id,))  # occurrences cascade

    person_data.add("reminders", count, erase)
