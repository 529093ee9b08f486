"""What the knowledge plugin keeps of a person (bases, documents, chunks and their vectors),
for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import fetch_all
from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter

from .store import KnowledgeStore


def register(registrar: Registrar, knowledge: KnowledgeStore) -> None:
    async def erase(user_id: str) -> None:
        for base in await fetch_all(registrar.context.db, "SELECT id FROM knowledge_bases WHERE user_id = %s",
                                    (user_id,)):
            await knowledge.delete_base(base)  # its vectors first, then the rows (documents cascade)

    keep_person_data(registrar, "knowledge", row_counter(registrar, {"knowledge_bases": "knowledge_bases",
                                                                     "knowledge_documents": "knowledge_documents"}),
                     erase)
