"""The SQL merging.py reads a new text's counterparts with, beside the plugin's migrations: on
the writer's cursor (MemoryStore.write's transaction). Apart from store.py, which imports
merging.py, so that merging.py can import this."""
from __future__ import annotations

from typing import Sequence

import aiopg


async def _memories_where(cursor: aiopg.Cursor, sql: str, params: Sequence) -> list[dict]:
    await cursor.execute(f"SELECT id::text AS id, content, category, slot FROM memories WHERE {sql}", params)
    return [dict(row) for row in await cursor.fetchall()]


async def newest_in_slot(cursor: aiopg.Cursor, owner: str, slot: str) -> list[dict]:
    """The person's most recently updated memory in `slot`, if any."""
    return await _memories_where(cursor, "user_id = %s AND slot = %s ORDER BY updated_at DESC LIMIT 1", (owner, slot))


async def memories_among(cursor: aiopg.Cursor, owner: str, memory_ids: list[str]) -> list[dict]:
    """The person's memories of these ids."""
    return await _memories_where(cursor, "user_id = %s AND id = ANY(%s::uuid[])", (owner, memory_ids))
