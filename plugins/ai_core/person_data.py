"""What the AI core keeps of a person, for deleting them (auth contract `PERSON_DATA`, asked by
the gateway through GET/DELETE /api/v1/people/{user_id}/data): the records of their tool calls
and the confirmations waiting for (or decided by) them."""
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
        calls = await fetch_value(context.db, "SELECT count(*) FROM ai_tool_calls WHERE user_id = %s", (user_id,))
        pending = await fetch_value(context.db, "SELECT count(*) FROM ai_pending_confirmations "
                                                "WHERE user_id = %s", (user_id,))
        return {"tool_calls": int(calls or 0), "confirmations": int(pending or 0)}

    async def erase(user_id: str) -> None:
        await execute(context.db, "DELETE FROM ai_tool_calls WHERE user_id = %s", (user_id,))
        await execute(context.db, "DELETE FROM ai_pending_confirmations WHERE user_id = %s", (user_id,))

    person_data.add("ai_core", count, erase)
