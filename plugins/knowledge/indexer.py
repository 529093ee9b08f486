"""The indexer: a document's chunks embedded and stored in the core's vector index (collection
`knowledge`). One indexer per service claims the oldest unindexed document (`FOR UPDATE SKIP
LOCKED`, so instances sharing the database never index one twice at once), embeds its chunks in
batches and marks it `ready`. A claim keeps a heartbeat; one left by a stopped service goes stale
and is taken over, so a restart resumes where indexing stopped."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Sequence

from gateway.context import Context
from gateway.database import unavailable as database_unavailable
from gateway.embeddings import EmbeddingError
from gateway.vector_store import IndexItem, VectorStoreUnavailable

from . import index_store
from .records import vector_store_unavailable
from .settings import KnowledgeSettings

log = logging.getLogger("plugins.knowledge")

COLLECTION = "knowledge"
KEYWORD_FIELDS = ("user_id", "kb_id", "document_id")
# The indexer looks for unclaimed work this often even when nothing woke it (another instance's
# documents, stale claims).
IDLE_POLL_SECONDS = 15.0
# The longest wait between two tries while the vector store or the embedding model is down.
MAX_RETRY_SECONDS = 60


def indexed_text(title: str, heading_path: Sequence[str], text: str) -> str:
    """What is embedded and tokenised for a chunk: its text under the document's title and its
    headings, so a passage that never names its subject is still found by it."""
    context = " / ".join(part for part in (title, *heading_path) if part)
    return f"{context}\n{text}" if context else text


class Indexer:
    """The vectors of the knowledge collection, and the background job that fills them."""

    def __init__(self, context: Context, settings: KnowledgeSettings):
        self.context = context
        self.settings = settings
        self._wake = asyncio.Event()
        self._collection_lock = asyncio.Lock()
        self._collection_ready = False

    def wake(self) -> None:
        """A document was queued: the job looks now rather than at its next idle poll."""
        self._wake.set()

    async def vector_call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
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
            queued = await index_store.queue_every_document(self.context.db)
            if queued:
                log.info("the knowledge collection is new: %d documents queued for indexing", queued)
                self._wake.set()

    async def index(self, document_id: str, *, heartbeat: bool) -> bool:
        """Embed and store every chunk of a claimed document, then mark it ready. False when the
        document was deleted or re-queued meanwhile (its vectors are then removed or redone)."""
        await self.prepare_collection()
        document = await index_store.document_to_index(self.context.db, document_id)
        if document is None:
            return False
        batch, position = self.settings.index_batch, -1
        while True:
            rows = await index_store.chunks_after(self.context.db, document_id, position, batch)
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
        done = await index_store.mark_ready(self.context.db, document_id)
        if not done and not await index_store.document_exists(self.context.db, document_id):
            await self.forget_vectors(document_id)
            return False
        return bool(done)

    async def _still_claimed(self, document_id: str) -> bool:
        touched = await index_store.keep_claim(self.context.db, document_id)
        if touched:
            return True
        if not await index_store.document_exists(self.context.db, document_id):
            await self.forget_vectors(document_id)  # deleted while it was being indexed
        return False

    async def forget_vectors(self, document_id: str) -> None:
        await self.context.vectors.delete(COLLECTION, where={"document_id": document_id})

    # -------------------------------------------------------------- the indexer

    async def _claim(self) -> str | None:
        return await index_store.claim_next(self.context.db)

    async def run(self, context: Context) -> None:
        """The background job: index queued documents one after another, for as long as the
        service runs. Documents that failed are given another chance at each start."""
        requeued = await self._retry_on_start(index_store.requeue_failed, self.context.db)
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
                if await self.index(document_id, heartbeat=True):
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
            row = await index_store.release_claim(self.context.db, document_id, reason[:1000], final)
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

