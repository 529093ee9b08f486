"""What the automation plugin keeps of a person, for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import execute, fetch_required
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA


def register(registrar: Registrar) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return

    async def count(user_id: str) -> dict[str, int]:
        row = await fetch_required(
            registrar.context.db, "SELECT (SELECT count(*) FROM automation_rules WHERE user_id = %s) AS rules,"
                                  " (SELECT count(*) FROM automation_scenes WHERE user_id = %s) AS scenes",
            (user_id, user_id))
        return {"automation_rules": int(row["rules"]), "scenes": int(row["scenes"])}

    async def erase(user_id: str) -> None:
        db = registrar.context.db
        await execute(db, "DELETE FROM automation_runs WHERE user_id = %s", (user_id,))
        await execute(db, "DELETE FROM automation_rules WHERE user_id = %s", (user_id,))  # claims cascade
        await execute(db, "DELETE FROM automation_scenes WHERE user_id = %s", (user_id,))

    person_data.add("automation", count, erase)
