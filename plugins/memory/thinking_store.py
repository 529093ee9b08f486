"""The thinking log's table (`thinking_entries`, migrations beside it) and the timeline that
merges it with the memories: every statement the thinking API answers with."""
from __future__ import annotations

from typing import Any

from gateway.database import execute, fetch_all, fetch_one, fetch_value

from .store import COLUMNS as MEMORY_COLUMNS

COLUMNS = ("id::text AS id, user_id, kind, content, suggestion, model, source_session_ids, source_memory_ids, "
           # Floored, so `since` = an entry's created_at includes that entry.
           "floor(extract(epoch FROM created_at) * 1000)::bigint AS created_at")
_OWNED = "(%(owner)s::text IS NULL OR user_id = %(owner)s)"
TIMELINE_SQL = f"""
    SELECT 'memory' AS type, id::text AS id, updated_at AS at FROM memories WHERE {_OWNED}
    UNION ALL
    SELECT 'thinking' AS type, id::text AS id, created_at AS at FROM thinking_entries WHERE {_OWNED}
    ORDER BY at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s"""
TIMELINE_COUNT_SQL = f"""
    SELECT (SELECT count(*) FROM memories WHERE {_OWNED}) + (SELECT count(*) FROM thinking_entries WHERE {_OWNED})"""


class ThinkingLog:
    """`owner` None means everyone's (the service credential and the administrator)."""

    def __init__(self, db: Any):
        self.db = db

    async def page(self, owner: str | None, since: int | None, limit: int, offset: int) -> tuple[list[dict], int]:
        params = {"owner": owner, "since": since, "limit": limit, "offset": offset}
        where = f"{_OWNED} AND (%(since)s::bigint IS NULL OR created_at >= to_timestamp(%(since)s::bigint / 1000.0))"
        total = await fetch_value(self.db, f"SELECT count(*) FROM thinking_entries WHERE {where}", params)
        rows = await fetch_all(self.db, f"SELECT {COLUMNS} FROM thinking_entries WHERE {where} "
                                        "ORDER BY seq DESC LIMIT %(limit)s OFFSET %(offset)s", params)
        return rows, int(total)

    async def add(self, entry_id: str, owner: str, entry: dict) -> tuple[dict | None, bool]:
        """(the entry, whether it is new); (None, False) when the id is another person's entry."""
        row = await fetch_one(
            self.db, "INSERT INTO thinking_entries (id, user_id, kind, content, suggestion, model, "
                     "source_session_ids, source_memory_ids, created_at) "
                     "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp()) "
                     f"ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}",
            (entry_id, owner, entry["kind"], entry["content"].strip(), entry["suggestion"].strip(), entry["model"],
             entry["source_session_ids"], entry["source_memory_ids"]))
        if row is not None:
            return row, True
        existing = await fetch_one(self.db, f"SELECT {COLUMNS} FROM thinking_entries WHERE id = %s AND user_id = %s",
                                   (entry_id, owner))
        return existing, False

    async def get(self, entry_id: str, owner: str | None) -> dict | None:
        return await fetch_one(self.db, f"SELECT {COLUMNS} FROM thinking_entries WHERE id = %s "
                                        "AND (%s::text IS NULL OR user_id = %s)", (entry_id, owner, owner))

    async def delete(self, entry_id: str, owner: str | None) -> bool:
        return bool(await execute(self.db, "DELETE FROM thinking_entries WHERE id = %s "
                                           "AND (%s::text IS NULL OR user_id = %s)", (entry_id, owner, owner)))

    async def timeline(self, owner: str | None, limit: int, offset: int) -> tuple[list[dict], int]:
        """Memories (at their latest change) and entries (at their creation), newest first."""
        params = {"owner": owner, "limit": limit, "offset": offset}
        total = await fetch_value(self.db, TIMELINE_COUNT_SQL, params)
        page = await fetch_all(self.db, TIMELINE_SQL, params)
        memory_ids = [row["id"] for row in page if row["type"] == "memory"]
        entry_ids = [row["id"] for row in page if row["type"] == "thinking"]
        memories = {row["id"]: row for row in (await fetch_all(
            self.db, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s::uuid[])", (memory_ids,))
            if memory_ids else [])}
        entries = {row["id"]: row for row in (await fetch_all(
            self.db, f"SELECT {COLUMNS} FROM thinking_entries WHERE id = ANY(%s::uuid[])", (entry_ids,))
            if entry_ids else [])}
        items = []
        for row in page:
            if row["type"] == "memory" and row["id"] in memories:
                memory = memories[row["id"]]
                items.append({"type": "memory", "id": row["id"], "user_id": memory["user_id"],
                              "timestamp": memory["updated_at"], "content": memory["content"],
                              "memory": memory, "thinking": None})
            elif row["type"] == "thinking" and row["id"] in entries:
                entry = entries[row["id"]]
                items.append({"type": "thinking", "id": row["id"], "user_id": entry["user_id"],
                              "timestamp": entry["created_at"], "content": entry["content"],
                              "memory": None, "thinking": entry})
            # else: deleted between the two reads; the page is one shorter
        return items, int(total)
