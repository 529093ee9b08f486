"""What the sessions plugin offers other plugins: the one store of conversations and messages."""
from __future__ import annotations

from typing import Protocol

from gateway.contracts import ContractKey


class Conversations(Protocol):
    """A session id is its owner's name for it (two users may both have `work`): every method
    that addresses a session takes its owner's user_id first, and none reaches another user's
    session by id alone, except `find_sessions` (the administrator's lookup)."""

    async def create_session(self, user_id: str, session_id: str | None = None, title: str | None = None,
                             is_main: bool = False, language: str | None = None) -> dict:
        """Conflict (`session_exists`) only when this user already has a session with that id.
        Without `title`, a default one in `language` (a code, or an Accept-Language value): "New
        chat" in English, else the spec's 新对话."""
        ...

    async def get_session(self, user_id: str, session_id: str) -> dict | None: ...

    async def find_sessions(self, session_id: str) -> list[dict]:
        """Every user's session with this id, the most recently updated first."""
        ...

    async def ensure_session(self, user_id: str, session_id: str, title: str | None = None,
                             language: str | None = None) -> dict:
        """The user's session, created when missing (titled as `create_session` does)."""
        ...

    async def list_sessions(self, user_id: str) -> list[dict]: ...

    async def rename_session(self, user_id: str, session_id: str, title: str,
                             if_title: str | None = None) -> dict | None:
        """None when the user has no such session. `if_title`: rename only while the title is
        exactly that, else Conflict (`title_changed`)."""
        ...

    async def delete_session(self, user_id: str, session_id: str) -> bool: ...

    async def delete_user_sessions(self, user_id: str) -> int: ...

    async def add_message(self, session_id: str, user_id: str, role: str, content: str,
                          msg_type: str = "chat", metadata: dict | None = None,
                          client_msg_id: str | None = None) -> dict:
        """A message of `user_id`'s session `session_id`; `{"duplicate": True, ...}` when
        `client_msg_id` was stored before. NotFound when the user has no such session."""
        ...

    async def has_client_message(self, user_id: str, session_id: str, client_msg_id: str) -> bool: ...

    async def list_messages(self, user_id: str, session_id: str, limit: int = 50, offset: int = 0,
                            before_id: int | None = None) -> list[dict]: ...

    async def all_messages(self, user_id: str, session_id: str) -> list[dict]: ...

    async def get_message(self, user_id: str, session_id: str, message_id: int) -> dict | None: ...

    async def last_message(self, user_id: str, session_id: str, role: str | None = None) -> dict | None:
        """The session's latest message (of `role`, when given)."""
        ...

    async def delete_messages_from(self, user_id: str, session_id: str, message_id: int) -> int:
        """Delete the message `message_id` and every later one of the session; how many went.
        Models' histories read afterwards no longer hold them (every instance)."""
        ...

    async def recent_history(self, user_id: str, session_id: str, limit: int = 20) -> list[dict]:
        """The last `limit` messages as `{"role", "content"}` for a model's context, oldest first.
        The dicts may be shared with the service's own copy of the history: read them only."""
        ...

    async def clear_messages(self, user_id: str, session_id: str) -> int: ...

    async def search_messages(self, user_id: str, query: str, limit: int = 50,
                              offset: int = 0) -> tuple[list[dict], int]: ...

    async def totals(self) -> dict[str, int]:
        """`{"users", "sessions", "messages"}` stored, over every user (the administrator's statistics)."""
        ...

    async def active_users(self, since_ms: int, limit: int = 1000) -> list[dict]:
        """The users whose sessions changed at or after `since_ms` (epoch milliseconds), as
        `{"user_id", "last_active"}` (epoch ms), the most recently active first (the thinking job)."""
        ...


CONVERSATIONS: ContractKey[Conversations] = ContractKey("sessions.conversations",
                                                        "sessions and their messages")
