"""The latest messages of recently used sessions, kept in this instance's memory (docs/sessions.md).

Recent history is read at the start of every chat turn, on the way to the first token. Each
instance keeps the latest messages of recently used sessions; a counter on the bus, bumped
after every write to a session's messages (on any instance), says whether a copy is current.
The counter never restarts while a copy could still be used: it lives for years and is bumped,
not deleted, when a session goes away (a client may reuse the id)."""
from __future__ import annotations

import collections
import time

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
