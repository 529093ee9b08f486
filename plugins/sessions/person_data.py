"""What the sessions plugin keeps of a person, for deleting them (auth contract `PERSON_DATA`)."""
from __future__ import annotations

from gateway.plugins import Registrar
from plugins.auth.contract import keep_person_data, row_counter

from .store import Conversations


def register(registrar: Registrar, conversations: Conversations) -> None:
    async def erase(user_id: str) -> None:
        await conversations.delete_user_sessions(user_id)  # their messages go with them

    keep_person_data(registrar, "sessions", row_counter(registrar, {"sessions": "chat_sessions",
                                                                    "messages": "chat_messages"}),
                     erase)
