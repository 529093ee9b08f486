"""Knowledge rows as the API answers them, and the errors the API answers about them
(docs/knowledge.md)."""
from __future__ import annotations

import json
import uuid

from gateway.errors import BadRequest, NotFound, ServiceUnavailable

from . import extraction

RETRY_AFTER_SECONDS = "5"

BASE_COLUMNS = ("b.id, b.user_id, b.name, b.description, b.session_id, b.created_at, b.updated_at, "
                "(SELECT count(*) FROM knowledge_documents d WHERE d.kb_id = b.id) AS doc_count")
DOCUMENT_COLUMNS = ("id, kb_id, user_id, title, source_type, source_ref, content_type, chunk_count, "
                    "content_length, index_status, index_error, created_at, updated_at")
CHUNK_COLUMNS = ("c.id, c.document_id, d.title AS document_title, c.kb_id, c.position, c.text, c.heading_path, "
                 "c.start_offset, c.end_offset")


def as_uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return None


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

