"""What the memory service keeps of a person, for deleting them (auth contract `PERSON_DATA`,
asked by the gateway through GET/DELETE /api/v1/people/{user_id}/data): their memories (records
and vectors), thinking entries and the replies kept for repeated writes."""
from __future__ import annotations

from gateway.database import execute, fetch_value
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA

from .store import MemoryStore


def register(registrar: Registrar, store: MemoryStore) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return
    context = registrar.context

    async def count(user_id: str) -> dict[str, int]:
        memories = await fetch_value(context.db, "SELECT count(*) FROM memories WHERE user_id = %s", (user_id,))
        entries = await fetch_value(context.db, "SELECT count(*) FROM thinking_entries WHERE user_id = %s", (user_id,))
        return {"memories": int(memories or 0), "thinking_entries": int(entries or 0)}

    async def erase(user_id: str) -> None:
        # The vectors first: a failure leaves the records, and asking again finishes.
        await context.vectors.delete(await store.collection(), where={"user_id": user_id})
        await execute(context.db, "DELETE FROM memories WHERE user_id = %s", (user_id,))
        await execute(context.db, "DELETE FROM thinking_entries WHERE user_id = %s", (user_id,))
        await execute(context.db, "DELETE FROM memory_writes WHERE user_id = %s", (user_id,))

    person_data.add("memory", count, erase)
