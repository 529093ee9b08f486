"""The one-off job that rewrites memories stored in the person's words ("I'm allergic to
peanuts", "我对花生过敏") into the neutral form ("The user is allergic to peanuts.", "用户对花生过敏。";
plugins/memory/person.py), vector included, so that old and new memories read alike and recall
says them in the second person (docs/memory.md, "A memory").

It runs in the background at each start of the memory service until it has gone through every
memory once: in id order, in batches, recording how far it got in `memory_jobs` (a restart goes
on from there; a finished job is not run again). A memory is rewritten only when it begins in
the first person; its id, source, dates and `previous_content` stay. An outage of the database,
the vector store or the embedding model pauses it, then it goes on. Memories written after the
service started are left alone: the rules, extraction and the tools write the neutral form
already, and the API stores what it is given."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway import database
from gateway.database import transaction
from gateway.embeddings import EmbeddingError
from gateway.vector_store import VectorStoreUnavailable

from .person import neutral
from .merging import slot_of
from .neutral_form_store import (database_now, job_state, memories_after, record_job_progress,
                                rewrite_content)
from .store import MemoryStore, item

log = logging.getLogger("plugins.memory.neutral_form")

JOB = "neutral_form"
BATCH = 256


def rewritten(content: str) -> str | None:
    """The neutral form of a memory said in the first person; None when it is not (already
    neutral, about someone else, or no sentence at all: left as it is)."""
    new = neutral(content)
    return new if new.rstrip(".。") != content.strip().rstrip(".。") else None


class NeutralFormJob:
    def __init__(self, store: MemoryStore, *, retry_after: float = 5.0):
        self.store = store
        self.retry_after = retry_after
        self.rewritten = 0
        self.started: Any = None

    async def run(self) -> None:
        while True:
            try:
                if await self._run():
                    return
            except (VectorStoreUnavailable, EmbeddingError) as error:
                log.warning("rewriting memories in the neutral form paused (%s); retrying in %.0f s",
                            error, self.retry_after)
            except Exception as error:
                if not database.unavailable(error):
                    raise
                log.warning("rewriting memories in the neutral form paused (%s); retrying in %.0f s",
                            error, self.retry_after)
            await asyncio.sleep(self.retry_after)

    async def _run(self) -> bool:
        db = self.store.context.db
        state = await job_state(db, JOB)
        if state is not None and state["done"]:
            return True
        if self.started is None:
            # What existed when the service started: new memories are written neutral already
            # (or, through the API, as given).
            self.started = await database_now(db)
        last = state["position"] if state is not None else ""
        collection = await self.store.collection()
        while True:
            rows = await memories_after(db, last, self.started, BATCH)
            for row in rows:
                new = rewritten(row["content"])
                if new is not None:
                    await self._rewrite(collection, row["id"], row["content"], new)
            last = rows[-1]["id"] if rows else last
            await record_job_progress(db, JOB, last, not rows)
            if not rows:
                log.info("memories in the neutral form: %d rewritten", self.rewritten)
                return True

    async def _rewrite(self, collection: str, memory_id: str, old: str, new: str) -> None:
        """One memory and its vector together; skipped when it changed meanwhile."""
        async with transaction(self.store.context.db) as cursor:
            row = await rewrite_content(cursor, memory_id, old, new, slot_of(new))
            if row is None:
                return
            await self.store.context.vectors.upsert(collection, [item(row)])
        self.rewritten += 1
