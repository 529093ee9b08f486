"""Knowledge bases, documents and chunks: the tables (PostgreSQL), the vectors (the core's
vector index, collection `knowledge`), and the indexer that moves chunks from one to the other.

A document's text is read and chunked while its create call waits (extraction and chunking in
this plugin's executor; PDF, Word and HTML in a child process with CPU-time and memory limits,
isolation.py); its chunks' rows are written at once. Indexing (embedding and storing
vectors) happens inline for short documents (`inline_index_chars`), so they answer `ready`, and
in the background for longer ones, which answer `pending`: one indexer per service claims the
oldest unindexed document (`FOR UPDATE SKIP LOCKED`, so instances sharing the database never
index one twice at once), embeds its chunks in batches and marks it `ready`. A claim keeps a
heartbeat; one left by a stopped service goes stale and is taken over, so a restart resumes
where indexing stopped. Search reads its hits back from the chunk rows, so a deleted document
is gone from results at once even before its vectors are removed."""
from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Sequence, TypeVar

from gateway.clock import now_ms
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction
from gateway.database import unavailable as database_unavailable
from gateway.embeddings import EmbeddingError
from gateway.errors import BadRequest, Conflict, NotFound, ServiceUnavailable
from gateway.fetch import FetchError, FetchRefused, FetchTimeout, FetchTooLarge, GuardedFetcher
from gateway.identity import Identity, owner_for
from gateway.vector_store import IndexItem, VectorStoreUnavailable
from plugins.files.contract import FILES

from . import chunking, extraction, isolation

log = logging.getLogger("plugins.knowledge")

COLLECTION = "knowledge"
KEYWORD_FIELDS = ("user_id", "kb_id", "document_id")
# A claim whose heartbeat is older than this was left by a service that stopped.
STALE_CLAIM_SECONDS = 60
# The indexer looks for unclaimed work this often even when nothing woke it (another instance's
# documents, stale claims).
IDLE_POLL_SECONDS = 15.0
# The longest wait between two tries while the vector store or the embedding model is down.
MAX_RETRY_SECONDS = 60
RETRY_AFTER_SECONDS = "5"

BASE_COLUMNS = ("b.id, b.user_id, b.name, b.description, b.session_id, b.created_at, b.updated_at, "
                "(SELECT count(*) FROM knowledge_documents d WHERE d.kb_id = b.id) AS doc_count")
DOCUMENT_COLUMNS = ("id, kb_id, user_id, title, source_type, source_ref, content_type, chunk_count, "
                    "content_length, index_status, index_error, created_at, updated_at")
CHUNK_COLUMNS = ("c.id, c.document_id, d.title AS document_title, c.kb_id, c.position, c.text, c.heading_path, "
                 "c.start_offset, c.end_offset")

Result = TypeVar("Result")


def as_uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return None


# ------------------------------------------------------------------ errors

def base_not_found(kb_id: str) -> NotFound:
    return NotFound(f"No knowledge base {kb_id}.", error_type="knowledge_base_not_found",
                    hint="List your knowledge bases with GET /api/v1/knowledge/bases.")


def document_not_found(document_id: str) -> NotFound:
    return NotFound(f"No knowledge document {document_id}.", error_type="knowledge_document_not_found",
                    hint="List a base's documents with GET /api/v1/knowledge/bases/{id}/documents.")


def vector_store_unavailable(error: BaseException) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"The vector store or the embedding model is unavailable: {error}", error_type="vector_store_unavailable",
        hint="Try again in a few seconds. Operators: check QDRANT_URL's server (or DATA_DIR's embedded index) and "
             "the embeddings provider; see docs/knowledge.md.", headers={"Retry-After": RETRY_AFTER_SECONDS})


def document_too_complex(error: Exception) -> BadRequest:
    return BadRequest(f"The document is too complex to read: {error}.", error_type="document_too_complex",
                      hint="Send its text, or a simpler file (saved again, or as plain text or Markdown); see "
                           "docs/knowledge.md for the limits.")


def unsupported_document_type(content_type: str) -> BadRequest:
    return BadRequest(f"Documents of type {content_type or 'unknown'} cannot be read.",
                      error_type="unsupported_document_type", hint=f"Supported: {extraction.SUPPORTED}.")


# ------------------------------------------------------------------ JSON shapes

def base_json(row: dict) -> dict:
    return {"id": str(row["id"]), "user_id": row["user_id"], "name": row["name"],
            "description": row["description"], "session_id": row["session_id"], "created_at": int(row["created_at"]),
            "updated_at": int(row["updated_at"]), "doc_count": int(row["doc_count"])}


def document_json(row: dict, raw_content: str | None = None) -> dict:
    body = {"id": str(row["id"]), "kb_id": str(row["kb_id"]), "user_id": row["user_id"], "title": row["title"],
            "source_type": row["source_type"], "source_ref": row["source_ref"], "content_type": row["content_type"],
            "content_length": int(row["content_length"]), "chunk_count": int(row["chunk_count"]),
            "index_status": row["index_status"], "index_error": row["index_error"],
            "created_at": int(row["created_at"]), "updated_at": int(row["updated_at"])}
    content = raw_content if raw_content is not None else row.get("raw_content")
    if content is not None:
        body["raw_content"] = content
    return body


def chunk_json(row: dict) -> dict:
    path = row["heading_path"]
    if isinstance(path, str):
        path = json.loads(path)
    return {"id": str(row["id"]), "document_id": str(row["document_id"]), "document_title": row["document_title"],
            "kb_id": str(row["kb_id"]), "position": int(row["position"]), "text": row["text"],
            "heading_path": list(path or []), "start_offset": int(row["start_offset"]),
            "end_offset": int(row["end_offset"])}


def indexed_text(title: str, heading_path: Sequence[str], text: str) -> str:
    """What is embedded and tokenised for a chunk: its text under the document's title and its
    headings, so a passage that never names its subject is still found by it."""
    context = " / ".join(part for part in (title, *heading_path) if part)
    return f"{context}\n{text}" if context else text


class KnowledgeStore:
    """Everything the handlers and the indexer need, under the plugin's `KNOWLEDGE` app key."""

    def __init__(self, context: Context, settings: dict):
        self.context = context
        self.settings = settings
        self._executor: ThreadPoolExecutor | None = None
        self._wake = asyncio.Event()
        self._collection_lock = asyncio.Lock()
        self._collection_ready = False

    # -------------------------------------------------------------- lifecycle

    async def lifespan(self, context: Context) -> AsyncIterator[None]:
        # Extraction and chunking have their own two threads, so that a large PDF cannot starve
        # the default executor that file and blob I/O use.
        self._executor = ThreadPoolExecutor(2, thread_name_prefix="knowledge")
        try:
            # Before the first request: a collection that is new (the embedding model changed)
            # re-queues every document at once, so none reads `ready` while it is not searchable.
            # A vector store that is down does not stop the service; the indexer tries again.
            try:
                await self.prepare_collection()
            except (VectorStoreUnavailable, EmbeddingError) as error:
                log.warning("the knowledge collection is not ready yet: %s", error)
            yield
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

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
            if row["bases"] >= self.settings["max_bases_per_user"]:
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
        await self._vector_call(self.context.vectors.delete, COLLECTION, where={"kb_id": base["id"]})
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
        await self._vector_call(self.context.vectors.delete, COLLECTION, where={"document_id": document["id"]})
        await execute(self.context.db, "DELETE FROM knowledge_documents WHERE id = %s", (document["id"],))
        await execute(self.context.db, "UPDATE knowledge_bases SET updated_at = %s WHERE id = %s",
                      (now_ms(), document["kb_id"]))

    async def add_document(self, identity: Identity, base: dict, body: dict) -> dict:
        """Read the source, chunk it, store it; index it now when it is short, else queue it."""
        source_type = body["source_type"]
        if source_type == "text":
            extracted, source_ref = await self._from_text(body), ""
        elif source_type == "file":
            extracted, source_ref = await self._from_file(identity, base, body)
        else:
            extracted, source_ref = await self._from_url(body)
        text = extracted.text
        if len(text) > self.settings["max_content_chars"]:
            raise BadRequest(f"The document holds {len(text)} characters of text, more than the "
                             f"{self.settings['max_content_chars']} allowed.", error_type="document_too_large",
                             hint="Split it into several documents.")
        if not chunking.normalised(text).strip():
            raise BadRequest("The document holds no text.", error_type="empty_document",
                             hint="A scanned PDF or an image has no text to read; send its text instead.")
        chunks = await self.in_executor(self._chunk, text, extracted.markdown)
        if len(chunks) > self.settings["max_chunks_per_document"]:
            raise BadRequest(f"The document would be cut into {len(chunks)} chunks, more than the "
                             f"{self.settings['max_chunks_per_document']} one document may have.",
                             error_type="too_many_chunks", hint="Split it into several documents.")
        inline = len(text) <= self.settings["inline_index_chars"]
        document_id = await self._insert_document(base, body["title"].strip(), source_type, source_ref,
                                                  extracted.content_type, text, chunks, inline)
        if inline:
            try:
                await self._index(document_id, heartbeat=False)
            except (VectorStoreUnavailable, EmbeddingError) as error:
                await execute(self.context.db, "DELETE FROM knowledge_documents WHERE id = %s", (document_id,))
                with contextlib.suppress(VectorStoreUnavailable):  # chunks stored before the failure
                    await self._forget_vectors(document_id)
                raise vector_store_unavailable(error) from None
        else:
            self._wake.set()
        row = await fetch_one(self.context.db, f"SELECT {DOCUMENT_COLUMNS} FROM knowledge_documents WHERE id = %s",
                              (document_id,))
        if row is None:  # deleted by another request meanwhile
            raise document_not_found(document_id)
        return document_json(row, text)

    def _chunk(self, text: str, markdown: bool) -> list[chunking.Chunk]:
        return chunking.chunk_text(text, markdown=markdown, max_units=self.settings["chunk_max_units"],
                                   min_units=self.settings["chunk_min_units"],
                                   overlap_units=self.settings["chunk_overlap_units"])

    async def _from_text(self, body: dict) -> extraction.Extracted:
        """The text as sent, exactly (`raw_content`); only the chunker's copy is normalised. (The
        core reads a NUL or half a surrogate pair escaped in JSON as U+FFFD: PostgreSQL stores neither.)"""
        content = body["content"]
        if content is None or not content.strip():
            raise BadRequest("A text document needs its `content`.", error_type="validation_error",
                             hint="Send the text in `content`, or choose source_type `file` or `url`.")
        markdown = await self.in_executor(chunking.looks_like_markdown, content)
        # A note written in Markdown is stored as such.
        return extraction.Extracted(content, "text/markdown" if markdown else "text/plain", markdown)

    async def _from_file(self, identity: Identity, base: dict, body: dict) -> tuple[extraction.Extracted, str]:
        file_id = body["file_id"]
        if not file_id:
            raise BadRequest("A file document needs `file_id`.", error_type="validation_error",
                             hint="Upload the file with POST /api/v1/files/upload and send its id.")
        files = self.context.contracts.get(FILES)
        if files is None:
            raise BadRequest("This service does not store files.", error_type="files_unavailable",
                             hint="Load the files plugin beside the knowledge plugin.")
        record = await files.find(file_id)
        if record is None or (record["user_id"] != base["user_id"] and not identity.is_admin):
            raise BadRequest(f"No file {file_id} of yours.", error_type="file_not_found",
                             hint="Upload the file with POST /api/v1/files/upload and send the id it answers.")
        mime_type = record["mime_type"]
        if not extraction.supported(mime_type):
            raise unsupported_document_type(mime_type)
        data = await files.read_content(file_id)
        if data is None:
            raise BadRequest(f"The stored content of file {file_id} is gone.", error_type="file_not_found",
                             hint="Upload the file again with POST /api/v1/files/upload.")
        return await self._extract(data, mime_type), str(record["id"])

    async def _from_url(self, body: dict) -> tuple[extraction.Extracted, str]:
        url = (body["url"] or body["content"] or "").strip()
        if not url:
            raise BadRequest("A url document needs `url`.", error_type="validation_error",
                             hint="Send the page's http(s) address in `url`.")
        fetcher = GuardedFetcher.for_context(self.context, timeout=self.settings["url_timeout"],
                                             max_bytes=self.settings["url_max_bytes"])
        try:
            result = await fetcher.fetch(url, headers={
                "Accept": "text/html, application/xhtml+xml, text/plain, text/markdown, "
                          "application/pdf;q=0.9, */*;q=0.5",
                "User-Agent": "assistant-gateway knowledge reader"})
        except FetchRefused as error:
            raise BadRequest(f"The address is not allowed: {error}.", error_type="url_refused",
                             hint="Only public http(s) addresses are read, unless the operator allows others "
                                  "([fetch] allow_hosts).") from None
        except FetchTooLarge as error:
            raise BadRequest(f"The page is too large: {error}.", error_type="document_too_large",
                             hint=f"Pages of up to {self.settings['url_max_bytes']} bytes are read.") from None
        except FetchTimeout as error:
            raise BadRequest(f"The page did not answer in time: {error}.", error_type="url_fetch_failed",
                             hint="Try again later, or send the text itself.") from None
        except FetchError as error:
            raise BadRequest(f"The page could not be fetched: {error}.", error_type="url_fetch_failed",
                             hint="Check the address.") from None
        if not result.ok:
            raise BadRequest(f"{result.url} answered HTTP {result.status}.", error_type="url_fetch_failed",
                             hint="Check the address.")
        header = result.headers.get("Content-Type", "")
        content_type = extraction.base_type(header) or _sniffed_type(result.body)
        if content_type == "application/octet-stream":
            content_type = _sniffed_type(result.body)
        if not extraction.supported(content_type):
            raise unsupported_document_type(content_type)
        charset = _charset(header)
        return await self._extract(result.body, content_type, charset), result.url

    async def _extract(self, data: bytes, content_type: str, charset: str | None = None) -> extraction.Extracted:
        """PDF, Word and HTML are read in a child process with CPU-time and memory limits
        (isolation.py); text types, a linear decode, here."""
        settings = self.settings
        limits = extraction.Limits(max_part_bytes=settings["extract_max_part_bytes"],
                                   max_unpacked_bytes=settings["extract_max_unpacked_bytes"],
                                   max_ratio=settings["extract_max_ratio"],
                                   max_pdf_content_bytes=settings["extract_max_pdf_content_bytes"])
        try:
            if extraction.needs_isolation(content_type):
                return await self.in_executor(isolation.extract_isolated, data, content_type, charset, limits,
                                              settings["extract_cpu_seconds"], settings["extract_memory_bytes"])
            return await self.in_executor(lambda: extraction.extract(data, content_type, charset=charset))
        except extraction.UnsupportedDocumentType:
            raise unsupported_document_type(content_type) from None
        except extraction.UnreadableDocument as error:
            raise BadRequest(f"The document cannot be read: {error}.", error_type="unreadable_document",
                             hint="Check that the file opens, and is not protected by a password.") from None
        except extraction.DocumentTooComplex as error:
            raise document_too_complex(error) from None

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
            if count >= self.settings["max_documents_per_base"]:
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
        hits = await self._vector_call(self.context.vectors.search, COLLECTION, query, where=where,
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

    # -------------------------------------------------------------- vectors

    async def _vector_call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A call on the vector index, the collection prepared first; its outage is a 503."""
        try:
            await self.prepare_collection()
            return await method(*args, **kwargs)
        except (VectorStoreUnavailable, EmbeddingError) as error:
            raise vector_store_unavailable(error) from None

    async def prepare_collection(self) -> None:
        """Create the collection for the current embedding model when it is missing. A new one
        (the first start, or the model changed) gets every stored chunk again, in the background."""
        if self._collection_ready:
            return
        async with self._collection_lock:
            if self._collection_ready:
                return
            created = await self.context.vectors.ensure(COLLECTION, keyword_fields=KEYWORD_FIELDS)
            self._collection_ready = True
        if created:
            queued = await execute(self.context.db, "UPDATE knowledge_documents SET index_status = 'pending', "
                                   "index_attempts = 0, index_error = NULL, index_claimed_at = NULL "
                                   "WHERE chunk_count > 0")
            if queued:
                log.info("the knowledge collection is new: %d documents queued for indexing", queued)
                self._wake.set()

    async def _index(self, document_id: str, *, heartbeat: bool) -> bool:
        """Embed and store every chunk of a claimed document, then mark it ready. False when the
        document was deleted or re-queued meanwhile (its vectors are then removed or redone)."""
        await self.prepare_collection()
        document = await fetch_one(self.context.db, "SELECT title, kb_id, user_id FROM knowledge_documents "
                                   "WHERE id = %s", (document_id,))
        if document is None:
            return False
        batch, position = self.settings["index_batch"], -1
        while True:
            rows = await fetch_all(self.context.db, "SELECT id, position, text, heading_path FROM knowledge_chunks "
                                   "WHERE document_id = %s AND position > %s ORDER BY position LIMIT %s",
                                   (document_id, position, batch))
            if not rows:
                break
            position = rows[-1]["position"]
            items = [IndexItem(id=str(row["id"]),
                               text=indexed_text(document["title"], row["heading_path"], row["text"]),
                               payload={"user_id": document["user_id"], "kb_id": str(document["kb_id"]),
                                        "document_id": document_id, "position": row["position"]})
                     for row in rows]
            await self.context.vectors.upsert(COLLECTION, items)
            if heartbeat and not await self._still_claimed(document_id):
                return False
        done = await execute(self.context.db, "UPDATE knowledge_documents SET index_status = 'ready', "
                             "index_error = NULL, index_claimed_at = NULL WHERE id = %s AND index_status = 'indexing'",
                             (document_id,))
        if not done and await fetch_value(self.context.db, "SELECT 1 FROM knowledge_documents WHERE id = %s",
                                          (document_id,)) is None:
            await self._forget_vectors(document_id)
            return False
        return bool(done)

    async def _still_claimed(self, document_id: str) -> bool:
        touched = await execute(self.context.db, "UPDATE knowledge_documents SET index_claimed_at = now() "
                                "WHERE id = %s AND index_status = 'indexing'", (document_id,))
        if touched:
            return True
        if await fetch_value(self.context.db, "SELECT 1 FROM knowledge_documents WHERE id = %s",
                             (document_id,)) is None:
            await self._forget_vectors(document_id)  # deleted while it was being indexed
        return False

    async def _forget_vectors(self, document_id: str) -> None:
        await self.context.vectors.delete(COLLECTION, where={"document_id": document_id})

    # -------------------------------------------------------------- the indexer

    async def _claim(self) -> str | None:
        row = await fetch_one(
            self.context.db,
            "UPDATE knowledge_documents SET index_status = 'indexing', index_claimed_at = now() WHERE id = ("
            " SELECT id FROM knowledge_documents WHERE index_status = 'pending' OR (index_status = 'indexing'"
            f" AND index_claimed_at < now() - interval '{STALE_CLAIM_SECONDS} seconds')"
            " ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id")
        return str(row["id"]) if row else None

    async def indexer(self, context: Context) -> None:
        """The background job: index queued documents one after another, for as long as the
        service runs. Documents that failed are given another chance at each start."""
        requeued = await self._retry_on_start(execute, self.context.db,
                                              "UPDATE knowledge_documents SET index_status = 'pending', "
                                              "index_attempts = 0 WHERE index_status = 'failed'")
        if requeued:
            log.info("%d knowledge documents that failed to index are queued again", requeued)
        pause = 0.0
        while True:
            if pause:
                await asyncio.sleep(pause)
                pause = 0.0
            self._wake.clear()
            document_id = None
            try:
                document_id = await self._claim()
                if document_id is None:
                    try:
                        await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)
                    except TimeoutError:
                        pass
                    continue
                if await self._index(document_id, heartbeat=True):
                    log.info("indexed knowledge document %s", document_id)
            except (VectorStoreUnavailable, EmbeddingError) as error:
                log.warning("knowledge indexing waits: %s", error)
                pause = await self._give_back(document_id, f"waiting for the vector store: {error}")
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if database_unavailable(error):
                    log.warning("knowledge indexing waits for the database: %s", error)
                    pause = 5.0
                    continue
                log.exception("indexing knowledge document %s failed", document_id)
                pause = await self._give_back(document_id, f"{type(error).__name__}: {error}", final=True)

    async def _give_back(self, document_id: str | None, reason: str, final: bool = False) -> float:
        """Return a claimed document to the queue with the reason, or mark it failed when the
        failure is not an outage; the seconds to wait before the next try (longer each time an
        outage goes on)."""
        if document_id is None:
            return 5.0
        try:
            row = await fetch_one(
                self.context.db,
                "UPDATE knowledge_documents SET index_attempts = index_attempts + 1, index_error = %s, "
                "index_claimed_at = NULL, index_status = CASE WHEN %s THEN 'failed' ELSE 'pending' END "
                "WHERE id = %s AND index_status = 'indexing' RETURNING index_attempts",
                (reason[:1000], final, document_id))
        except Exception as error:  # the database is down too: the claim goes stale and is retaken
            log.warning("could not release knowledge document %s: %s", document_id, error)
            return 5.0
        attempts = row["index_attempts"] if row else 1
        return float(min(MAX_RETRY_SECONDS, 2 ** min(attempts, 10)))

    async def _retry_on_start(self, function: Callable[..., Any], *args: Any) -> Any:
        while True:
            try:
                return await function(*args)
            except Exception as error:
                if not database_unavailable(error):
                    raise
                await asyncio.sleep(5.0)


def _sniffed_type(body: bytes) -> str:
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return extraction.PDF
    if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
        return "text/html"
    try:
        # final=False: a character cut at the end of the window is no error.
        codecs.getincrementaldecoder("utf-8")().decode(body[:4096], final=False)
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


def _charset(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return None
