"""What the knowledge plugin keeps of a person (bases, documents, chunks and their vectors),
for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import fetch_all, fetch_required
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA


def register(registrar: Registrar, knowledge) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return

    async def count(user_id: str) -> dict[str, int]:
        row = await fetch_required(
            registrar.context.db,
            "SELECT (SELECT count(*) FROM knowledge_bases WHERE user_id = %s) AS bases,"
            " (SELECT count(*) FROM knowledge_documents WHERE user_id = %s) AS documents", (user_id, user_id))
        return {"knowledge_bases": int(row["bases"]), "knowledge_documents": int(row["documents"])}

    async def erase(user_id: str) -> None:
        for base in await fetch_all(registrar.context.db, "SELECT id FROM knowledge_bases WHERE user_id = %s",
                                    (user_id,)):
            await knowledge.delete_base(base)  # its vectors first, then the rows (documents cascade)

    person_data.add("knowledge", count, erase)
