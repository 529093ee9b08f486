"""The conversations store: sessions and their messages in PostgreSQL, provided to other plugins
as the `CONVERSATIONS` contract (the chat channel, webhooks). Every method is async and returns
the spec's shapes with integer epoch-millisecond timestamps."""
from __future__ import annotations

import collections
import logging
import secrets
import string
import time

import psycopg2
import psycopg2.errors

from gateway.batching import Batcher
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_required, fetch_value, json_rows, transaction
from gateway.errors import Conflict, NotFound
from gateway.text import dumps_text

log = logging.getLogger("plugins.sessions.store")

# A session created without a title is named in its person's language (docs/sessions.md, "Default
# titles"); the spec's 新对话 when the language is unknown. Each of these counts as "no title yet":
# the first message's words replace it.
DEFAULT_TITLES = {"zh": "新对话", "en": "New chat"}
DEFAULT_TITLE = DEFAULT_TITLES["zh"]
_DEFAULT_TITLES_SQL = ", ".join(f"'{title}'" for title in DEFAULT_TITLES.values())
SESSION_ID_ALPHABET = string.ascii_lowercase + string.digits
HISTORY_ROLES = ("user", "assistant")

SESSION_COLUMNS = ("id, user_id, title, is_main, "
                   "(extract(epoch FROM created_at) * 1000)::bigint AS created_at, "
                   "(extract(epoch FROM updated_at) * 1000)::bigint AS updated_at")
MESSAGE_COLUMNS = ("id, session_id, user_id, role, msg_type, content, metadata, client_msg_id, "
                   "(extract(epoch FROM created_at) * 1000)::bigint AS created_at")

# The two search statements, named so that the plan test and the benchmark EXPLAIN exactly these.
TOTALS_SQL = ("SELECT (SELECT count(DISTINCT user_id) FROM chat_sessions) AS users, "
              "(SELECT count(*) FROM chat_sessions) AS sessions, (SELECT count(*) FROM chat_messages) AS messages")
SEARCH_COUNT_SQL = "SELECT count(*) FROM chat_messages WHERE user_id = %s AND content ILIKE %s"
SEARCH_PAGE_SQL = (
    "SELECT m.id, m.session_id, s.title AS session_title, m.role, m.content, "
    "(extract(epoch FROM m.created_at) * 1000)::bigint AS created_at "
    "FROM chat_messages AS m JOIN chat_sessions AS s ON s.user_id = m.user_id AND s.id = m.session_id "
    "WHERE m.user_id = %s AND m.content ILIKE %s "
    "ORDER BY m.id DESC LIMIT %s OFFSET %s")


# Recent history is read at the start of every chat turn, on the way to the first token. Each
# instance keeps the latest messages of recently used sessions; a counter on the bus, bumped
# after every write to a session's messages (on any instance), says whether a copy is current.
# The counter never restarts while a copy could still be used: it lives for years and is bumped,
# not deleted, when a session goes away (a client may reuse the id).
HISTORY_DEPTH = 50            # messages kept per session: a turn asking for at most this many is served
HISTORY_CACHE_SESSIONS = 2000
HISTORY_CACHE_CHARS = 8_000_000
HISTORY_CACHE_AGE = 86400.0
HISTORY_VERSION_TTL = 10 * 365 * 86400.0


def session_key(user_id: str, session_id: str) -> str:
    """One string for the session `session_id` of `user_id` (ids are per owner): the length
    prefix keeps it unambiguous whatever characters the two hold."""
    return f"{len(user_id)}.{user_id}.{session_id}"


def history_version_key(user_id: str, session_id: str) -> str:
    return f"sessions:history-version:{session_key(user_id, session_id)}"


class CachedHistory:
    """One session's copy: the last HISTORY_DEPTH history messages, their ids beside them."""

    __slots__ = ("version", "ids", "items", "complete", "chars", "stored")

    def __init__(self, version: int, rows: list[dict], complete: bool, stored: float):
        """`rows`: {id, role, content}, oldest first."""
        rows = rows[-HISTORY_DEPTH:]
        self.version, self.complete, self.stored = version, complete, stored
        self.ids = [row["id"] for row in rows]
        self.items = [{"role": row["role"], "content": row["content"]} for row in rows]
        self.chars = sum(len(item["content"]) for item in self.items)


class RecentHistoryCache:
    """Per session a `CachedHistory` (whether it is all of the session's history, when it was
    stored), least recently used dropped first, bounded by sessions and by characters.

    A turn reads its session's copy and adds two messages to it: both are kept cheap (a slice of
    items made once, an append), as every turn of a burst does them before its first token."""

    def __init__(self, max_sessions: int = HISTORY_CACHE_SESSIONS, max_chars: int = HISTORY_CACHE_CHARS):
        self.max_sessions, self.max_chars = max_sessions, max_chars
        self._entries: collections.OrderedDict[str, CachedHistory] = collections.OrderedDict()
        self._chars = 0

    def get(self, session_id: str, version: int, limit: int) -> list[dict] | None:
        """The last `limit` messages, oldest first. The dicts are the copy's own: read them only."""
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        items = entry.items
        if entry.version != version or time.monotonic() - entry.stored > HISTORY_CACHE_AGE or \
                (limit > len(items) and not entry.complete):
            return None
        self._entries.move_to_end(session_id)
        return items[max(0, len(items) - limit):]

    def put(self, session_id: str, version: int, rows: list[dict], complete: bool) -> None:
        self._store(session_id, CachedHistory(version, rows, complete, time.monotonic()))

    def appended(self, session_id: str, version: int, message: tuple[int, str, str]) -> None:
        """A message was written and the counter bumped to `version`. The copy follows when it
        was current just before (nobody else bumped in between) and the message goes at its end
        by id — or is already in it (read after the insert, before the bump); else it is forgotten."""
        entry = self._entries.get(session_id)
        if entry is None:
            return
        message_id, role, content = message
        if entry.version != version - 1:
            self.drop(session_id)
        elif not entry.ids or message_id > entry.ids[-1]:
            entry.version = version
            entry.ids.append(message_id)
            entry.items.append({"role": role, "content": content})
            grown = len(content)
            if len(entry.ids) > HISTORY_DEPTH:
                del entry.ids[0]
                grown -= len(entry.items.pop(0)["content"])
                entry.complete = False
            entry.chars += grown
            self._chars += grown
            self._trim()
        elif message_id in entry.ids:
            entry.version = version
        else:  # an older id committed after a newer one was taken in: order unknown here
            self.drop(session_id)

    def _store(self, session_id: str, entry: CachedHistory) -> None:
        self.drop(session_id)
        self._entries[session_id] = entry
        self._chars += entry.chars
        self._trim()

    def _trim(self) -> None:
        while self._entries and (len(self._entries) > self.max_sessions or self._chars > self.max_chars):
            self.drop(next(iter(self._entries)))

    def drop(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._chars -= entry.chars


def generate_session_id() -> str:
    return "session_" + "".join(secrets.choice(SESSION_ID_ALPHABET) for _ in range(12))


def session_not_found(session_id: str) -> NotFound:
    """The same answer for a missing session and another user's: its existence stays private."""
    return NotFound(f"Session {session_id} was not found.", error_type="session_not_found",
                    hint="List your sessions with GET /api/v1/sessions, or create one with POST /api/v1/sessions.")


def escape_like(text: str) -> str:
    """`text` as a literal inside a LIKE pattern (backslash is PostgreSQL's default escape)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# One message: inserted, its session touched when it went in, and the row returned; or the
# row stored before with the same client_msg_id (`duplicate`).
ADD_MESSAGE_SQL = (
    f"WITH inserted AS ("
    f"  INSERT INTO chat_messages (session_id, user_id, role, msg_type, content, metadata, client_msg_id)"
    f"  VALUES (%(session)s, %(user)s, %(role)s, %(type)s, %(content)s, %(metadata)s, %(client)s)"
    f"  ON CONFLICT (user_id, session_id, client_msg_id) WHERE client_msg_id IS NOT NULL DO NOTHING"
    f"  RETURNING {MESSAGE_COLUMNS}), "
    f"touched AS (UPDATE chat_sessions SET updated_at = now(), "
    f"  title = CASE WHEN title IN ({_DEFAULT_TITLES_SQL}) AND %(title)s::text IS NOT NULL THEN %(title)s ELSE title END "
    f"  WHERE user_id = %(user)s AND id = %(session)s AND EXISTS (SELECT 1 FROM inserted)) "
    f"SELECT *, false AS duplicate FROM inserted "
    f"UNION ALL "
    f"SELECT {MESSAGE_COLUMNS}, true AS duplicate FROM chat_messages "
    f"WHERE user_id = %(user)s AND session_id = %(session)s "
    f"AND client_msg_id = %(client)s AND NOT EXISTS (SELECT 1 FROM inserted)")

# Many messages at once: the same outcome per message as ADD_MESSAGE_SQL, from one JSON array
# of them (gateway.database.json_rows). One constant statement whatever the batch's size: a
# statement of two CTEs per message cost PostgreSQL ~15 ms to plan and run for 50 messages, and
# this process 27 µs a message to quote (bench/README.md). The ids are drawn in the batch's
# order, so the rows can be matched to their messages (and messages stored together are
# numbered in the order they came).
ADD_MESSAGES_SQL = f"""WITH given AS (
  SELECT batch_index, session AS session_id, "user" AS user_id, role, type AS msg_type, content,
         metadata::jsonb AS metadata, client AS client_msg_id, title, nextval('chat_messages_id_seq') AS new_id
  FROM json_to_recordset(%s::json) AS given (batch_index int, session text, "user" text, role text, type text,
                                              content text, metadata text, client text, title text)
  ORDER BY batch_index),
inserted AS (
  INSERT INTO chat_messages (id, session_id, user_id, role, msg_type, content, metadata, client_msg_id)
  SELECT new_id, session_id, user_id, role, msg_type, content, metadata, client_msg_id FROM given
  ON CONFLICT (user_id, session_id, client_msg_id) WHERE client_msg_id IS NOT NULL DO NOTHING
  RETURNING *),
touched AS (
  UPDATE chat_sessions SET updated_at = now(),
    title = CASE WHEN chat_sessions.title IN ({_DEFAULT_TITLES_SQL}) AND changed.title IS NOT NULL
                 THEN changed.title ELSE chat_sessions.title END
  FROM (SELECT DISTINCT ON (inserted.user_id, inserted.session_id) inserted.user_id, inserted.session_id, given.title
        FROM inserted JOIN given ON given.new_id = inserted.id
        ORDER BY inserted.user_id, inserted.session_id, given.title IS NULL, inserted.id) AS changed
  WHERE chat_sessions.user_id = changed.user_id AND chat_sessions.id = changed.session_id),
outcome AS (
  SELECT given.batch_index, inserted.*, false AS duplicate FROM given JOIN inserted ON inserted.id = given.new_id
  UNION ALL
  SELECT given.batch_index, stored.*, true FROM given JOIN chat_messages AS stored
    ON stored.user_id = given.user_id AND stored.session_id = given.session_id
    AND stored.client_msg_id = given.client_msg_id
  WHERE NOT EXISTS (SELECT 1 FROM inserted WHERE inserted.id = given.new_id))
SELECT batch_index, {MESSAGE_COLUMNS}, duplicate FROM outcome"""


TITLE_CHARS = 60


def default_title(language: str | None) -> str:
    """The title of a session created without one: in `language` (a code such as "en" or
    "zh-CN", or an Accept-Language header's value, its preferences in order), the first it names
    that there is a title for; else the spec's 新对话."""
    ranked = []
    for position, part in enumerate((language or "").split(",")):
        tag, _, parameters = part.partition(";")
        weight = 1.0
        for parameter in parameters.split(";"):
            name, _, value = parameter.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        primary = tag.strip().split("-")[0].split("_")[0].lower()
        if primary in DEFAULT_TITLES and weight > 0:
            ranked.append((-weight, position, primary))
    return DEFAULT_TITLES[min(ranked)[2]] if ranked else DEFAULT_TITLE


def title_from(text: str | None) -> str | None:
    """A session's title from its first message, until one is given (a rename, or a better one
    the assistant makes): its first line of words, cut at a word near TITLE_CHARS. None for a
    message with no words (an image alone), which leaves the title for the next."""
    line = next((" ".join(line.split()) for line in (text or "").splitlines() if line.strip()), "")
    if not line:
        return None
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > TITLE_CHARS // 2 else cut).rstrip(" ,.;:!?，。；：！？") + "…"


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
    def db(self):
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
            deleted = cursor.rowcount
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
            deleted = cursor.rowcount
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
