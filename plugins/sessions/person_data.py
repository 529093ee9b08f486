"""What the sessions plugin keeps of a person, for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.database import fetch_required
from gateway.plugins import Registrar
from plugins.auth.contract import PERSON_DATA

from .store import Conversations


def register(registrar: Registrar, conversations: Conversations) -> None:
    person_data = registrar.context.contracts.get(PERSON_DATA)
    if person_data is None:
        return

    async def count(user_id: str) -> dict[str, int]:
        row = await fetch_required(
            registrar.context.db, "SELECT (SELECT count(*) FROM chat_sessions WHERE user_id = %s) AS sessions,"
                                  " (SELECT count(*) FROM chat_messages WHERE user_id = %s) AS messages",
            (user_id, user_id))
        return {"sessions": int(row["sessions"]), "messages": int(row["messages"])}

    async def erase(user_id: str) -> None:
        await conversations.delete_user_sessions(user_id)  # their messages go with them

    person_data.add("sessions", count, erase)
