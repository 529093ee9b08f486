"""Knowledge bases, documents and chunks: the tables (PostgreSQL), the vectors (the core's
vector index, collection `knowledge`), and the indexer that moves chunks from one to the other.

A document's text is read (sources.py) and chunked while its create call waits (extraction and
chunking in this plugin's executor; PDF, Word and HTML in a child process with CPU-time and
memory limits, isolation.py); its chunks' rows are written at once. Indexing (embedding and
storing vectors) happens inline for short documents (`inline_index_chars`), so they answer
`ready`, and in the background for longer ones, which answer `pending` (indexer.py). Search
reads its hits back from the chunk rows (records.py shapes them), so a deleted document is gone
from results at once even before its vectors are removed."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Sequence, TypeVar

from gateway.clock import now_ms
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction
from gateway.embeddings import EmbeddingError
from gateway.errors import BadRequest, Conflict
from gateway.identity import Identity, owner_for
from gateway.vector_store import VectorStoreUnavailable

from . import chunking
from .indexer import COLLECTION, Indexer
from .records import (BASE_COLUMNS, CHUNK_COLUMNS, DOCUMENT_COLUMNS, as_uuid, base_json, base_not_found, chunk_json,
                      document_json, document_not_found, vector_store_unavailable)
from .sources import SourceReader
from .settings import KnowledgeSettings

log = logging.getLogger("plugins.knowledge")

Result = TypeVar("Result")


class KnowledgeStore:
    """Everything the handlers and the indexer need, under the plugin's `KNOWLEDGE` app key."""

    def __init__(self, context: Context, settings: KnowledgeSettings):
        self.context = context
        self.settings = settings
        self._executor: ThreadPoolExecutor | None = None
        self.indexer = Indexer(context, settings)
        self.sources = SourceReader(context, settings, self.in_executor)

    # -------------------------------------------------------------- lifecycle

    async def lifespan(self, context: Context) -> AsyncIterator[None]:
        # Extraction and chunking have their own two threads, so that a large PDF cannot starve
        # the default executor that file and blob I/O use.
        self._executor = ThreadPoolExecutor(2, thread_name_prefix="knowledge")
        try:
            # Before the first request: a collection that is new (the embedding model changed)
            # re-queues every document at once, so none reads `ready` while it is not searchable
            # (meanwhile in a rolling restart's replacement still taking the embedded store over).
            async with self.context.vectors.started(self._prepare_collection, "knowledge-collection"):
                yield
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def _prepare_collection(self) -> None:
        """A vector store that is down does not stop the service; the indexer tries again."""
        try:
            await self.indexer.prepare_collection()
        except (VectorStoreUnavailable, EmbeddingError) as error:
            log.warning("the knowledge collection is not ready yet: %s", error)

    async def in_executor(self, function: Callable[..., Result], *args: Any) -> Result:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    # -------------------------------------------------------------- bases

    async def create_base(self, owner: str, name: str, description: str,
                          session_id: str | None = None) -> tuple[dict, bool]:
        """The new base and True; for a session's base that exists already, that base and False
        (one base per person and session, created on first use)."""
        base_id, created = str(uuid.uuid4()), now_ms()
        async with transaction(self.context.db) as cursor:
            # One user's creations are serialised, so the count below cannot be raced past.
            await cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"knowledge:{owner}",))
            if session_id is not None:
                await cursor.execute(f"SELECT {BASE_COLUMNS} FROM knowledge_bases b "
                                     "WHERE b.user_id = %s AND b.session_id = %s", (owner, session_id))
                existing = await cursor.fetchone()
                if existing is not None:
                    return base_json(existing), False
            await cursor.execute("SELECT count(*) AS bases FROM knowledge_bases WHERE user_id = %s", (owner,))
            row = await cursor.fetchone()
            if row["bases"] >= self.settings.max_bases_per_user:
                raise Conflict(f"You have {row['bases']} knowledge bases, the most allowed.",
                               error_type="too_many_knowledge_bases", hint="Delete one you no longer need.")
            await cursor.execute(
                "INSERT INTO knowledge_bases (id, user_id, name, description, session_id, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (base_id, owner, name, description, session_id, created, created))
            row = {"id": base_id, "user_id": owner, "name": name, "description": description,
                   "session_id": session_id, "created_at": created, "updated_at": created, "doc_count": 0}
        return base_json(row), True

    async def list_bases(self, owner: str, session_id: str | None = None) -> list[dict]:
        """All the owner's bases; with `session_id`, only that session's own."""
        rows = await fetch_all(self.context.db, f"SELECT {BASE_COLUMNS} FROM knowledge_bases b "
                               "WHERE b.user_id = %s AND (%s::text IS NULL OR b.session_id = %s) "
                               "ORDER BY b.created_at, b.id", (owner, session_id, session_id))
        return [base_json(row) for row in rows]

    async def base_for(self, identity: Identity, kb_id: str, requested_owner: str | None) -> dict:
        """The base when the caller may reach it: their own; for the administrator, the named
        user's (`user_id`) or, without one, anyone's. 404 otherwise, so ids cannot be probed."""
        key = as_uuid(kb_id)
        row = None if key is None else await fetch_one(
            self.context.db, f"SELECT {BASE_COLUMNS} FROM knowledge_bases b WHERE b.id = %s", (key,))
        if row is None or not self._reaches(identity, row["user_id"], requested_owner):
            raise base_not_found(kb_id)
        return base_json(row)

    @staticmethod
    def _reaches(identity: Identity, owner: str, requested_owner: str | None) -> bool:
        if requested_owner:
            return owner == owner_for(identity, requested_owner)
        return owner == identity.user_id or identity.is_admin

    async def update_base(self, base: dict, name: str, description: str) -> None:
        await execute(self.context.db, "UPDATE knowledge_bases SET name = %s, description = %s, updated_at = %s "
                      "WHERE id = %s", (name, description, now_ms(), base["id"]))

    async def delete_base(self, base: dict) -> None:
        # The vectors go first: when the vector store is down nothing is deleted (503), and the
        # rows, which search reads its hits back from, never outlive what they describe.
        await self.indexer.vector_call(self.context.vectors.delete, COLLECTION, where={"kb_id": base["id"]})
        await execute(self.context.db, "DELETE FROM knowledge_bases WHERE id = %s", (base["id"],))

    # -------------------------------------------------------------- documents

    async def list_documents(self, kb_id: str, include_content: bool = False) -> list[dict]:
        columns = DOCUMENT_COLUMNS + (", raw_content" if include_content else "")
        rows = await fetch_all(self.context.db, f"SELECT {columns} FROM knowledge_documents WHERE kb_id = %s "
                               "ORDER BY created_at, id", (kb_id,))
        return [document_json(row) for row in rows]

    async def document_for(self, identity: Identity, document_id: str, requested_owner: str | None) -> dict:
        key = as_uuid(document_id)
        row = None if key is None else await fetch_one(
            self.context.db, f"SELECT {DOCUMENT_COLUMNS}, raw_content FROM knowledge_documents WHERE id = %s", (key,))
        if row is None or not self._reaches(identity, row["user_id"], requested_owner):
            raise document_not_found(document_id)
        return document_json(row)

    async def chunks_of(self, document_id: str) -> list[dict]:
        rows = await fetch_all(self.context.db, f"SELECT {CHUNK_COLUMNS} FROM knowledge_chunks c "
                               "JOIN knowledge_documents d ON d.id = c.document_id "
                               "WHERE c.document_id = %s ORDER BY c.position", (document_id,))
        return [chunk_json(row) for row in rows]

    async def delete_document(self, document: dict) -> None:
        await self.indexer.vector_call(self.context.vectors.delete, COLLECTION, where={"document_id": document["id"]})
        await execute(self.context.db, "DELETE FROM knowledge_documents WHERE id = %s", (document["id"],))
        await execute(self.context.db, "UPDATE knowledge_bases SET updated_at = %s WHERE id = %s",
                      (now_ms(), document["kb_id"]))

    async def add_document(self, identity: Identity, base: dict, body: dict) -> dict:
        """Read the source, chunk it, store it; index it now when it is short, else queue it."""
        source_type = body["source_type"]
        extracted, source_ref = await self.sources.read(identity, base, body)
        text = extracted.text
        if len(text) > self.settings.max_content_chars:
            raise BadRequest(f"The document holds {len(text)} characters of text, more than the "
                             f"{self.settings.max_content_chars} allowed.", error_type="document_too_large",
                             hint="Split it into several documents.")
        if not chunking.normalised(text).strip():
            raise BadRequest("The document holds no text.", error_type="empty_document",
                             hint="A scanned PDF or an image has no text to read; send its text instead.")
        chunks = await self.in_executor(self._chunk, text, extracted.markdown)
        if len(chunks) > self.settings.max_chunks_per_document:
            raise BadRequest(f"The document would be cut into {len(chunks)} chunks, more than the "
                             f"{self.settings.max_chunks_per_document} one document may have.",
                             error_type="too_many_chunks", hint="Split it into several documents.")
        inline = len(text) <= self.settings.inline_index_chars
        document_id = await self._insert_document(base, body["title"].strip(), source_type, source_ref,
                                                  extracted.content_type, text, chunks, inline)
        if inline:
            try:
                await self.indexer.index(document_id, heartbeat=False)
            except (VectorStoreUnavailable, EmbeddingError) as error:
                await execute(self.context.db, "DELETE FROM knowledge_documents WHERE id = %s", (document_id,))
                with contextlib.suppress(VectorStoreUnavailable):  # chunks stored before the failure
                    await self.indexer.forget_vectors(document_id)
                raise vector_store_unavailable(error) from None
        else:
            self.indexer.wake()
        row = await fetch_one(self.context.db, f"SELECT {DOCUMENT_COLUMNS} FROM knowledge_documents WHERE id = %s",
                              (document_id,))
        if row is None:  # deleted by another request meanwhile
            raise document_not_found(document_id)
        return document_json(row, text)

    def _chunk(self, text: str, markdown: bool) -> list[chunking.Chunk]:
        return chunking.chunk_text(text, markdown=markdown, max_units=self.settings.chunk_max_units,
                                   min_units=self.settings.chunk_min_units,
                                   overlap_units=self.settings.chunk_overlap_units)


    async def _insert_document(self, base: dict, title: str, source_type: str, source_ref: str,
                               content_type: str, text: str, chunks: list[chunking.Chunk], inline: bool) -> str:
        document_id = str(uuid.uuid4())
        created = now_ms()
        async with transaction(self.context.db) as cursor:
            # Locks the base: documents of one base are counted and added one at a time, and a
            # base being deleted meanwhile makes this a 404 instead of an orphan.
            await cursor.execute("SELECT id FROM knowledge_bases WHERE id = %s FOR UPDATE", (base["id"],))
            if await cursor.fetchone() is None:
                raise base_not_found(base["id"])
            await cursor.execute("SELECT count(*) AS documents FROM knowledge_documents WHERE kb_id = %s",
                                 (base["id"],))
            count = (await cursor.fetchone())["documents"]
            if count >= self.settings.max_documents_per_base:
                raise Conflict(f"This knowledge base holds {count} documents, the most allowed.",
                               error_type="too_many_documents", hint="Delete some, or start another base.")
            await cursor.execute(
                "INSERT INTO knowledge_documents (id, kb_id, user_id, title, source_type, source_ref, content_type,"
                " raw_content, content_length, chunk_count, index_status, index_claimed_at, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, CASE WHEN %s THEN now() END, %s, %s)",
                (document_id, base["id"], base["user_id"], title, source_type, source_ref, content_type, text,
                 len(text), len(chunks), "indexing" if inline else "pending", inline, created, created))
            if chunks:
                await cursor.execute(
                    "INSERT INTO knowledge_chunks (id, document_id, kb_id, user_id, position, text, heading_path,"
                    " start_offset, end_offset) SELECT id, %s, %s, %s, position, text, heading_path, start_offset,"
                    " end_offset FROM unnest(%s::uuid[], %s::int[], %s::text[], %s::jsonb[], %s::int[], %s::int[])"
                    " AS chunk (id, position, text, heading_path, start_offset, end_offset)",
                    (document_id, base["id"], base["user_id"], [str(uuid.uuid4()) for _ in chunks],
                     list(range(len(chunks))), [chunk.text for chunk in chunks],
                     [json.dumps(list(chunk.heading_path), ensure_ascii=False) for chunk in chunks],
                     [chunk.start for chunk in chunks], [chunk.end for chunk in chunks]))
            await cursor.execute("UPDATE knowledge_bases SET updated_at = %s WHERE id = %s", (created, base["id"]))
        return document_id

    # -------------------------------------------------------------- search

    async def search(self, owner: str, query: str, kb_ids: Sequence[str], limit: int, mode: str,
                     session_id: str | None = None) -> list[dict]:
        """`session_id` (None: every base) leaves out the bases of other sessions: what is
        searched is the general bases and that session's own ("": general bases only)."""
        where: dict[str, str | list[str]] = {"user_id": owner}
        named: list[str] | None = None
        if kb_ids:
            wanted = list(dict.fromkeys(kb_ids))
            keys = [as_uuid(kb_id) for kb_id in wanted]
            found = {str(row["id"]) for row in await fetch_all(
                self.context.db, "SELECT id FROM knowledge_bases WHERE user_id = %s AND id = ANY(%s::uuid[])",
                (owner, [key for key in keys if key]))}
            unknown = [kb_id for kb_id, key in zip(wanted, keys) if key not in found]
            if unknown:
                raise BadRequest(f"No knowledge base {', '.join(unknown)} of yours.",
                                 error_type="knowledge_base_not_found",
                                 hint="Send ids from GET /api/v1/knowledge/bases, or leave kb_ids out to search "
                                      "all your bases.", extra={"unknown_kb_ids": unknown})
            named = [key for key in keys if key]
        if session_id is not None:
            # Other sessions' bases are left out, named in kb_ids or not.
            in_scope = [str(row["id"]) for row in await fetch_all(
                self.context.db, "SELECT id FROM knowledge_bases WHERE user_id = %s "
                "AND (session_id IS NULL OR session_id = %s) ORDER BY created_at, id", (owner, session_id))]
            named = in_scope if named is None else [key for key in named if key in set(in_scope)]
            if not named:
                return []
        if named is not None:
            where["kb_id"] = named
        elif not await fetch_value(self.context.db, "SELECT EXISTS (SELECT 1 FROM knowledge_documents WHERE "
                                   "user_id = %s AND chunk_count > 0)", (owner,)):
            return []
        # A few more than asked: a hit whose document was deleted a moment ago is dropped below.
        hits = await self.indexer.vector_call(self.context.vectors.search, COLLECTION, query, where=where,
                                              limit=limit + 5, mode=mode)
        if not hits:
            return []
        rows = await fetch_all(
            self.context.db, f"SELECT {CHUNK_COLUMNS}, d.source_type, d.source_ref, b.name AS kb_name "
            "FROM knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id "
            "JOIN knowledge_bases b ON b.id = c.kb_id WHERE c.id = ANY(%s::uuid[]) AND c.user_id = %s",
            ([hit.id for hit in hits], owner))
        by_id = {str(row["id"]): row for row in rows}
        results = []
        for hit in hits:
            row = by_id.get(str(hit.id))
            if row is not None:
                results.append({**chunk_json(row), "kb_name": row["kb_name"], "score": float(hit.score),
                                "source_type": row["source_type"], "source_ref": row["source_ref"]})
        return results[:limit]

