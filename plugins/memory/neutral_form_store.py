"""The SQL of the neutral-form job (neutral_form.py), beside the plugin's migrations: how far it
got (`memory_jobs`), the memories it goes through, and one memory's rewrite."""
from __future__ import annotations

from datetime import datetime
from typing import Any

import aiopg

from gateway.database import fetch_all, fetch_one, fetch_value, transaction

from .store import COLUMNS


async def job_state(db: aiopg.Pool, job: str) -> dict | None:
    """{position, done} of a one-off job; None before its first batch."""
    return await fetch_one(db, "SELECT position, done FROM memory_jobs WHERE name = %s", (job,))


async def database_now(db: aiopg.Pool) -> Any:
    """The database's clock, the one `created_at` is written by."""
    return await fetch_value(db, "SELECT clock_timestamp()")


async def memories_after(db: aiopg.Pool, last_id: str, created_before: datetime, limit: int) -> list[dict]:
    """{id, content} of up to `limit` memories after `last_id` in id order, created before `created_before`."""
    return await fetch_all(db, "SELECT id::text AS id, content FROM memories WHERE id::text > %s "
                               "AND created_at < %s ORDER BY id::text LIMIT %s", (last_id, created_before, limit))


async def record_job_progress(db: aiopg.Pool, job: str, position: str, done: bool) -> None:
    async with transaction(db) as cursor:
        await cursor.execute(
            "INSERT INTO memory_jobs (name, position, done) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, done = EXCLUDED.done, "
            "updated_at = now()", (job, position, done))


async def rewrite_content(cursor: aiopg.Cursor, memory_id: str, old: str, new: str, slot: str | None) -> dict | None:
    """Replace a memory's content `old` by `new` (in the caller's transaction); the memory's row,
    None when its content is no longer `old`."""
    await cursor.execute(f"UPDATE memories SET content = %s, slot = %s WHERE id = %s AND content = %s "
                         f"RETURNING {COLUMNS}", (new, slot, memory_id, old))
    row = await cursor.fetchone()
    return dict(row) if row is not None else None
