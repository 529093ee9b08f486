"""The SQL of indexing, beside the plugin's migrations: the claim, heartbeat and status of a
document's indexing (`knowledge_documents`) and the chunks it reads (`knowledge_chunks`). Apart
from store.py, which imports the indexer, so that the indexer can import this."""
from __future__ import annotations

import aiopg

from gateway.database import execute, fetch_all, fetch_one, fetch_value

# A claim whose heartbeat is older than this was left by a service that stopped.
STALE_CLAIM_SECONDS = 60


async def queue_every_document(db: aiopg.Pool) -> int:
    """Queue every document with chunks for indexing again (a new collection); how many."""
    return await execute(db, "UPDATE knowledge_documents SET index_status = 'pending', "
                             "index_attempts = 0, index_error = NULL, index_claimed_at = NULL "
                             "WHERE chunk_count > 0")


async def requeue_failed(db: aiopg.Pool) -> int:
    """Give the documents that failed to index another chance; how many."""
    return await execute(db, "UPDATE knowledge_documents SET index_status = 'pending', "
                             "index_attempts = 0 WHERE index_status = 'failed'")


async def document_to_index(db: aiopg.Pool, document_id: str) -> dict | None:
    """{title, kb_id, user_id} of the document; None when it was deleted."""
    return await fetch_one(db, "SELECT title, kb_id, user_id FROM knowledge_documents "
                               "WHERE id = %s", (document_id,))


async def chunks_after(db: aiopg.Pool, document_id: str, position: int, limit: int) -> list[dict]:
    """Up to `limit` chunks of the document after `position`, in order."""
    return await fetch_all(db, "SELECT id, position, text, heading_path FROM knowledge_chunks "
                               "WHERE document_id = %s AND position > %s ORDER BY position LIMIT %s",
                           (document_id, position, limit))


async def mark_ready(db: aiopg.Pool, document_id: str) -> int:
    """Mark a document being indexed ready; 0 when it was deleted or re-queued meanwhile."""
    return await execute(db, "UPDATE knowledge_documents SET index_status = 'ready', "
                             "index_error = NULL, index_claimed_at = NULL WHERE id = %s AND index_status = 'indexing'",
                         (document_id,))


async def document_exists(db: aiopg.Pool, document_id: str) -> bool:
    return await fetch_value(db, "SELECT 1 FROM knowledge_documents WHERE id = %s",
                             (document_id,)) is not None


async def keep_claim(db: aiopg.Pool, document_id: str) -> int:
    """The claim's heartbeat; 0 when the document is no longer being indexed."""
    return await execute(db, "UPDATE knowledge_documents SET index_claimed_at = now() "
                             "WHERE id = %s AND index_status = 'indexing'", (document_id,))


async def claim_next(db: aiopg.Pool) -> str | None:
    """Claim the oldest unindexed document (or one whose claim went stale); its id."""
    row = await fetch_one(
        db,
        "UPDATE knowledge_documents SET index_status = 'indexing', index_claimed_at = now() WHERE id = ("
        " SELECT id FROM knowledge_documents WHERE index_status = 'pending' OR (index_status = 'indexing'"
        f" AND index_claimed_at < now() - interval '{STALE_CLAIM_SECONDS} seconds')"
        " ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id")
    return str(row["id"]) if row else None


async def release_claim(db: aiopg.Pool, document_id: str, reason: str, final: bool) -> dict | None:
    """Back to the queue with the reason, or failed when `final`; {index_attempts}, None when
    the document was not claimed."""
    return await fetch_one(
        db,
        "UPDATE knowledge_documents SET index_attempts = index_attempts + 1, index_error = %s, "
        "index_claimed_at = NULL, index_status = CASE WHEN %s THEN 'failed' ELSE 'pending' END "
        "WHERE id = %s AND index_status = 'indexing' RETURNING index_attempts",
        (reason, final, document_id))
