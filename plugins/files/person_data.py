"""What the files plugin keeps of a person (rows and their blobs), for deleting them (auth
contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import fetch_all
from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter

from .store import FILE_COLUMNS, FileStore


def register(registrar: Registrar, files: FileStore) -> None:
    async def erase(user_id: str) -> None:
        for record in await fetch_all(registrar.context.db, f"SELECT {FILE_COLUMNS} FROM files WHERE user_id = %s",
                                      (user_id,)):
            await files.delete(record)

    keep_person_data(registrar, "files", row_counter(registrar, {"files": "files"}), erase)
