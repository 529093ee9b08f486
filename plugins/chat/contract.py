"""What the chat plugin offers other plugins: handing text in as a chat turn, and who is
connected to which session."""
from __future__ import annotations

from typing import Protocol

from gateway.contracts import ContractKey


class ChatTurns(Protocol):
    async def submit_turn(self, user_id: str, session_id: str, text: str, mode: str = "text",
                          attachments: list[dict] | None = None,
                          exclude_connection_id: str | None = None) -> dict:
        """Queue `text` as a turn of the session, like a `message` frame (voice hands recognised
        speech in this way). `exclude_connection_id`: the device it came from gets no echo."""
        ...


class Presence(Protocol):
    async def known_clients(self, user_id: str | None = None) -> list[dict]: ...

    async def set_client_note(self, client_id: str, note: str) -> dict | None: ...

    async def session_state(self, session_id: str, local: dict[str, list[dict]] | None = None) -> dict | None: ...

    async def live_sessions(self) -> list[dict]: ...


CHAT_TURNS: ContractKey[ChatTurns] = ContractKey("chat.turns", "hand text in as a chat turn")
PRESENCE: ContractKey[Presence] = ContractKey("chat.presence", "connected devices and live sessions")
