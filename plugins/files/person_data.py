"""What the files plugin keeps of a person (rows and their blobs), for deleting them (auth
contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import fetch_all, fetch_value
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA

from .store import FILE_COLUMNS, FileStore


def register(registrar: Registrar, files: FileStore) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return

    async def count(user_id: str) -> dict[str, int]:
        total = await fetch_value(registrar.context.db, "SELECT count(*) FROM files WHERE user_id = %s", (user_id,))
        return {"files": int(total or 0)}

    async def erase(user_id: str) -> None:
        for record in await fetch_all(registrar.context.db, f"SELECT {FILE_COLUMNS} FROM files WHERE user_id = %s",
                                      (user_id,)):
            await files.delete(record)

    person_data.add("files", count, erase)
