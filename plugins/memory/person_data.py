"""What the memory service keeps of a person, for deleting them (auth contract `PERSON_DATA`,
asked by the gateway through GET/DELETE /api/v1/people/{user_id}/data): their memories (records
and vectors), thinking entries and the replies kept for repeated writes."""
from __future__ import annotations

from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter, row_eraser

from .store import MemoryStore


def register(registrar: Registrar, store: MemoryStore) -> None:
    erase_rows = row_eraser(registrar, ["memories", "thinking_entries", "memory_writes"])

    async def erase(user_id: str) -> None:
        # The vectors first: a failure leaves the records, and asking again finishes.
        await registrar.context.vectors.delete(await store.collection(), where={"user_id": user_id})
        await erase_rows(user_id)

    keep_person_data(registrar, "memory", row_counter(registrar, {"memories": "memories",
                                                                  "thinking_entries": "thinking_entries"}), erase)
