"""The conversations store: sessions and their messages in PostgreSQL, provided to other plugins
as the `CONVERSATIONS` contract (the chat channel, webhooks). Every method is async and returns
the spec's shapes with integer epoch-millisecond timestamps. Its named SQL is in queries.py, the
recent history each instance keeps in history_cache.py, default titles in title_text.py."""
from __future__ import annotations

import logging
import secrets
import string

import aiopg
import psycopg2
import psycopg2.errors

from gateway.batching import Batcher
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_required, fetch_value, json_rows, transaction
from gateway.errors import Conflict, NotFound
from gateway.text import dumps_text

from .history_cache import HISTORY_DEPTH, HISTORY_VERSION_TTL, RecentHistoryCache, history_version_key, session_key
from .queries import (ADD_MESSAGE_SQL, ADD_MESSAGES_SQL, MESSAGE_COLUMNS, SEARCH_COUNT_SQL, SEARCH_PAGE_SQL,
                      SESSION_COLUMNS, TOTALS_SQL, escape_like)
from .title_text import default_title, title_from

log = logging.getLogger("plugins.sessions.store")

SESSION_ID_ALPHABET = string.ascii_lowercase + string.digits
HISTORY_ROLES = ("user", "assistant")


def generate_session_id() -> str:
    return "session_" + "".join(secrets.choice(SESSION_ID_ALPHABET) for _ in range(12))


def session_not_found(session_id: str) -> NotFound:
    """The same answer for a missing session and another user's: its existence stays private."""
    return NotFound(f"Session {session_id} was not found.", error_type="session_not_found",
                    hint="List your sessions with GET /api/v1/sessions, or create one with POST /api/v1/sessions.")


def _message(row: dict) -> dict:
    row["metadata"] = row.get("metadata") or {}
    return row


class Conversations:
    """Sessions and messages. A session id is its owner's name for it: every method that
    addresses a session names its owner, so no caller reaches another user's session by its id
    (the administrator's lookup by id alone is `find_sessions`)."""

    def __init__(self, context: Context):
        self.context = context
        self._history = RecentHistoryCache()
        self._message_writes: Batcher[dict, dict | None] = Batcher(self._insert_message, self._insert_messages)

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    # ------------------------------------------------------------ sessions
    async def create_session(self, user_id: str, session_id: str | None = None, title: str | None = None,
                             is_main: bool = False, language: str | None = None) -> dict:
        """`language` names the default title when `title` is None (`default_title`)."""
        session_id = session_id or generate_session_id()
        row = await fetch_one(
            self.db,
            f"INSERT INTO chat_sessions (id, user_id, title, is_main) VALUES (%s, %s, %s, %s) "
            f"ON CONFLICT (user_id, id) DO NOTHING RETURNING {SESSION_COLUMNS}",
            (session_id, user_id, title or default_title(language), bool(is_main)))
        if row is None:  # only the owner's own sessions can collide
            raise Conflict(f"You already have a session with id {session_id}.", error_type="session_exists",
                           hint="Leave out session_id to have one generated, or choose another.")
        return row

    async def get_session(self, user_id: str, session_id: str) -> dict | None:
        return await fetch_one(self.db, f"SELECT {SESSION_COLUMNS} FROM chat_sessions WHERE user_id = %s AND id = %s",
                               (user_id, session_id))

    async def find_sessions(self, session_id: str) -> list[dict]:
        """Every user's session with this id, the most recently updated first (the administrator's view).
        The order is the stored microseconds': `updated_at` alone would be the output's
        milliseconds, where two sessions made in one millisecond tie."""
        return await fetch_all(self.db, f"SELECT {SESSION_COLUMNS} FROM chat_sessions WHERE id = %s "
                                        f"ORDER BY chat_sessions.updated_at DESC, user_id", (session_id,))

    async def ensure_session(self, user_id: str, session_id: str, title: str | None = None,
                             language: str | None = None) -> dict:
        session = await fetch_one(
            self.db,
            f"WITH inserted AS (INSERT INTO chat_sessions (id, user_id, title) VALUES (%(id)s, %(user)s, %(title)s) "
            f"  ON CONFLICT (user_id, id) DO NOTHING RETURNING {SESSION_COLUMNS}) "
            f"SELECT * FROM inserted UNION ALL "
            f"SELECT {SESSION_COLUMNS} FROM chat_sessions WHERE user_id = %(user)s AND id = %(id)s",
            {"id": session_id, "user": user_id, "title": title or default_title(language)})
        if session is None:  # created by a concurrent call after this statement's snapshot
            session = await self.get_session(user_id, session_id)
        if session is None:
            raise session_not_found(session_id)
        return session

    async def list_sessions(self, user_id: str) -> list[dict]:
        return await fetch_all(self.db,
                               f"SELECT {SESSION_COLUMNS} FROM chat_sessions WHERE user_id = %s "
                               f"ORDER BY chat_sessions.updated_at DESC, id", (user_id,))

    async def rename_session(self, user_id: str, session_id: str, title: str,
                             if_title: str | None = None) -> dict | None:
        """The session with its new title, or None when the user has none with that id. The
        title is not activity: `updated_at` (the list's order) stays. With `if_title`, only a
        session still titled exactly that is renamed: else Conflict `title_changed` (a title the
        assistant made does not overwrite one the person gave meanwhile)."""
        if if_title is None:
            return await fetch_one(self.db, f"UPDATE chat_sessions SET title = %s WHERE user_id = %s AND id = %s "
                                            f"RETURNING {SESSION_COLUMNS}", (title, user_id, session_id))
        renamed = await fetch_one(self.db, f"UPDATE chat_sessions SET title = %s WHERE user_id = %s AND id = %s "
                                           f"AND title = %s RETURNING {SESSION_COLUMNS}",
                                  (title, user_id, session_id, if_title))
        if renamed is None and await self.get_session(user_id, session_id) is not None:
            raise Conflict(f"Session {session_id} is no longer titled as expected; it was left as it is.",
                           error_type="title_changed",
                           hint="Read the session's title again (GET /api/v1/sessions/{id}) before renaming it.")
        return renamed

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        deleted = await execute(self.db, "DELETE FROM chat_sessions WHERE user_id = %s AND id = %s",
                                (user_id, session_id)) > 0
        if deleted:
            await self._history_changed(user_id, session_id)
        return deleted

    async def delete_user_sessions(self, user_id: str) -> int:
        rows = await fetch_all(self.db, "DELETE FROM chat_sessions WHERE user_id = %s RETURNING id", (user_id,))
        for row in rows:
            await self._history_changed(user_id, row["id"])
        return len(rows)

    # ------------------------------------------------------------ messages
    async def add_message(self, session_id: str, user_id: str, role: str, content: str,
                          msg_type: str = "chat", metadata: dict | None = None,
                          client_msg_id: str | None = None) -> dict:
        # One statement, so one round trip (this is on every chat turn's path to the first
        # token), batched with the messages other tasks store meanwhile (gateway.batching):
        # insert, touch the session only when a row went in, return it; or return the row a
        # re-sent client_msg_id already stored.
        try:
            row = await self._message_writes.submit(
                {"session": session_id, "user": user_id, "role": role, "type": msg_type, "content": content or "",
                 "metadata": dumps_text(metadata or {}), "client": client_msg_id or None,
                 "title": title_from(content) if role == "user" else None})
        except psycopg2.errors.ForeignKeyViolation:
            raise session_not_found(session_id) from None
        if row is None:  # the same client_msg_id committed by someone else after this statement began
            row = await fetch_required(
                self.db, f"SELECT {MESSAGE_COLUMNS}, true AS duplicate FROM chat_messages "
                         f"WHERE user_id = %s AND session_id = %s AND client_msg_id = %s",
                (user_id, session_id, client_msg_id))
        elif not row["duplicate"] and role in HISTORY_ROLES:
            await self._history_changed(user_id, session_id, (row["id"], role, content or ""))
        return _message(row)

    async def _insert_message(self, params: dict) -> dict | None:
        return await fetch_one(self.db, ADD_MESSAGE_SQL, params)

    async def _insert_messages(self, batch: list[dict]) -> list[dict | None]:
        """Each message as `_insert_message` stores it, all in one statement. None for a
        message whose client_msg_id an earlier one of the batch took (add_message reads that one)."""
        rows: list[dict | None] = [None] * len(batch)
        for row in await fetch_all(self.db, ADD_MESSAGES_SQL, (json_rows(batch),)):
            rows[row.pop("batch_index")] = row
        return rows

    async def has_client_message(self, user_id: str, session_id: str, client_msg_id: str) -> bool:
        """Whether a message sent with this client_msg_id is stored in the session."""
        return await fetch_value(self.db, "SELECT EXISTS (SELECT 1 FROM chat_messages WHERE user_id = %s "
                                          "AND session_id = %s AND client_msg_id = %s)",
                                 (user_id, session_id, client_msg_id)) is True

    async def list_messages(self, user_id: str, session_id: str, limit: int = 50, offset: int = 0,
                            before_id: int | None = None) -> list[dict]:
        """Oldest first. With `before_id`: the latest `limit` messages older than that id
        (scrolling back through history); otherwise `offset` counts from the oldest."""
        if before_id is not None:
            rows = await fetch_all(
                self.db,
                f"SELECT * FROM (SELECT {MESSAGE_COLUMNS} FROM chat_messages "
                f"WHERE user_id = %s AND session_id = %s AND id < %s ORDER BY id DESC LIMIT %s) AS page ORDER BY id",
                (user_id, session_id, before_id, limit))
        else:
            rows = await fetch_all(
                self.db,
                f"SELECT {MESSAGE_COLUMNS} FROM chat_messages WHERE user_id = %s AND session_id = %s "
                f"ORDER BY id LIMIT %s OFFSET %s", (user_id, session_id, limit, offset))
        return [_message(row) for row in rows]

    async def all_messages(self, user_id: str, session_id: str) -> list[dict]:
        rows = await fetch_all(self.db,
                               f"SELECT {MESSAGE_COLUMNS} FROM chat_messages WHERE user_id = %s AND session_id = %s "
                               f"ORDER BY id", (user_id, session_id))
        return [_message(row) for row in rows]

    async def get_message(self, user_id: str, session_id: str, message_id: int) -> dict | None:
        row = await fetch_one(self.db, f"SELECT {MESSAGE_COLUMNS} FROM chat_messages "
                                       f"WHERE user_id = %s AND session_id = %s AND id = %s",
                              (user_id, session_id, message_id))
        return _message(row) if row is not None else None

    async def last_message(self, user_id: str, session_id: str, role: str | None = None) -> dict | None:
        """The session's latest message (of `role`, when given)."""
        row = await fetch_one(self.db, f"SELECT {MESSAGE_COLUMNS} FROM chat_messages "
                                       f"WHERE user_id = %s AND session_id = %s AND (%s::text IS NULL OR role = %s) "
                                       f"ORDER BY id DESC LIMIT 1", (user_id, session_id, role, role))
        return _message(row) if row is not None else None

    async def delete_messages_from(self, user_id: str, session_id: str, message_id: int) -> int:
        """Delete the message `message_id` and every later one of the session (an edited message
        and what answered it, a reply regenerated); how many went."""
        async with transaction(self.db) as cursor:
            await cursor.execute("DELETE FROM chat_messages WHERE user_id = %s AND session_id = %s AND id >= %s",
                                 (user_id, session_id, message_id))
            deleted = int(cursor.rowcount)
            if deleted:
                await cursor.execute("UPDATE chat_sessions SET updated_at = now() WHERE user_id = %s AND id = %s",
                                     (user_id, session_id))
        if deleted:
            await self._history_changed(user_id, session_id)
        return deleted

    async def recent_history(self, user_id: str, session_id: str, limit: int = 20) -> list[dict]:
        """The last `limit` user and assistant turns, oldest first, as the AI core wants them;
        from this instance's copy when no write happened since (one bus read, no query)."""
        key = session_key(user_id, session_id)
        version = await self._history_version(user_id, session_id)
        if version is None:
            # No counter yet (a new session): start one now, so the copy made below is current
            # for the next turn instead of waiting for a write to start the counter.
            await self.context.bus.set(history_version_key(user_id, session_id), str(secrets.randbits(48)),
                                       ttl=HISTORY_VERSION_TTL, only_if_absent=True)
            version = await self._history_version(user_id, session_id)
        elif (cached := self._history.get(key, version, limit)) is not None:
            return cached
        depth = max(limit, HISTORY_DEPTH)
        rows = await fetch_all(
            self.db,
            "SELECT id, role, content FROM (SELECT id, role, content FROM chat_messages "
            "WHERE user_id = %s AND session_id = %s AND role IN %s ORDER BY id DESC LIMIT %s) AS recent ORDER BY id",
            (user_id, session_id, HISTORY_ROLES, depth))
        # The version was read before the rows: a write in between makes the copy look stale, never current.
        if version is not None and depth == HISTORY_DEPTH:
            self._history.put(key, version, rows, complete=len(rows) < depth)
        return [{"role": row["role"], "content": row["content"]} for row in rows[max(0, len(rows) - limit):]]

    async def _history_version(self, user_id: str, session_id: str) -> int | None:
        value = await self.context.bus.get(history_version_key(user_id, session_id))
        return int(value) if value is not None else None

    async def _history_changed(self, user_id: str, session_id: str,
                               appended: tuple[int, str, str] | None = None) -> None:
        """Bump the session's history counter after a write; `appended`: the (id, role, content)
        of an added message, which this instance's copy can take on. A failure to bump is
        logged, not raised: the write itself is done."""
        key, cached = history_version_key(user_id, session_id), session_key(user_id, session_id)
        try:
            version, _ = await self.context.bus.incr(key, HISTORY_VERSION_TTL)
            if version == 1:
                # A new counter (or one the bus lost): start it somewhere no old copy can match.
                version = secrets.randbits(48)
                await self.context.bus.set(key, str(version), ttl=HISTORY_VERSION_TTL)
                self._history.drop(cached)
                return
        except Exception:
            log.exception("bumping the history counter of session %s failed", session_id)
            self._history.drop(cached)
            return
        if appended is not None:
            self._history.appended(cached, version, appended)
        else:
            self._history.drop(cached)

    async def clear_messages(self, user_id: str, session_id: str) -> int:
        async with transaction(self.db) as cursor:
            await cursor.execute("DELETE FROM chat_messages WHERE user_id = %s AND session_id = %s",
                                 (user_id, session_id))
            deleted = int(cursor.rowcount)
            await cursor.execute("UPDATE chat_sessions SET updated_at = now() WHERE user_id = %s AND id = %s",
                                 (user_id, session_id))
        await self._history_changed(user_id, session_id)
        return deleted

    # ------------------------------------------------------------ search
    async def search_messages(self, user_id: str, query: str, limit: int = 50,
                              offset: int = 0) -> tuple[list[dict], int]:
        """Messages of `user_id` containing `query` (case-insensitive substring), newest first,
        and how many there are in all. The trigram index serves queries of 3+ characters."""
        pattern = f"%{escape_like(query)}%"
        total = await fetch_value(self.db, SEARCH_COUNT_SQL, (user_id, pattern))
        rows = await fetch_all(self.db, SEARCH_PAGE_SQL, (user_id, pattern, limit, offset))
        results = [{"message_id": str(row["id"]), "session_id": row["session_id"],
                    "session_title": row["session_title"], "role": row["role"],
                    "content": row["content"], "created_at": row["created_at"]} for row in rows]
        return results, int(total or 0)

    # ------------------------------------------------------------ activity
    async def totals(self) -> dict[str, int]:
        row = await fetch_one(self.db, TOTALS_SQL)
        return {name: int(row[name]) if row else 0 for name in ("users", "sessions", "messages")}

    async def active_users(self, since_ms: int, limit: int = 1000) -> list[dict]:
        """The users whose sessions changed at or after `since_ms`, the most recently active first."""
        return await fetch_all(
            self.db, "SELECT user_id, floor(extract(epoch FROM max(updated_at)) * 1000)::bigint AS last_active "
                     "FROM chat_sessions WHERE updated_at >= to_timestamp(%s / 1000.0) "
                     "GROUP BY user_id ORDER BY last_active DESC, user_id LIMIT %s", (since_ms, limit))
