"""A document's text read from its source: the text as sent, a stored file (the files plugin's
contract) or a web page (the core's guarded fetcher). PDF, Word and HTML are read in a child
process with CPU-time and memory limits (isolation.py), in the store's executor."""
from __future__ import annotations

import codecs
from typing import Any, Awaitable, Callable, cast

from gateway.context import Context
from gateway.errors import BadRequest
from gateway.fetch import FetchError, FetchRefused, FetchTimeout, FetchTooLarge, GuardedFetcher
from gateway.identity import Identity
from plugins.files.contract import FILES

from . import chunking, extraction, isolation
from .records import document_too_complex, unsupported_document_type
from .settings import KnowledgeSettings

InExecutor = Callable[..., Awaitable[Any]]


class SourceReader:
    """Reads `text`, `file` and `url` documents into extracted text, off the event loop."""

    def __init__(self, context: Context, settings: KnowledgeSettings, in_executor: InExecutor):
        self.context = context
        self.settings = settings
        self.in_executor = in_executor

    async def read(self, identity: Identity, base: dict, body: dict) -> tuple[extraction.Extracted, str]:
        """The document's text and its `source_ref` (the file's id, the page's final address)."""
        source_type = body["source_type"]
        if source_type == "text":
            return await self.from_text(body), ""
        if source_type == "file":
            return await self.from_file(identity, base, body)
        return await self.from_url(body)

    async def from_text(self, body: dict) -> extraction.Extracted:
        """The text as sent, exactly (`raw_content`); only the chunker's copy is normalised. (The
        core reads a NUL or half a surrogate pair escaped in JSON as U+FFFD: PostgreSQL stores neither.)"""
        content = body["content"]
        if content is None or not content.strip():
            raise BadRequest("A text document needs its `content`.", error_type="validation_error",
                             hint="Send the text in `content`, or choose source_type `file` or `url`.")
        markdown = await self.in_executor(chunking.looks_like_markdown, content)
        # A note written in Markdown is stored as such.
        return extraction.Extracted(content, "text/markdown" if markdown else "text/plain", markdown)

    async def from_file(self, identity: Identity, base: dict, body: dict) -> tuple[extraction.Extracted, str]:
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
        return await self.extract(data, mime_type), str(record["id"])

    async def from_url(self, body: dict) -> tuple[extraction.Extracted, str]:
        url = (body["url"] or body["content"] or "").strip()
        if not url:
            raise BadRequest("A url document needs `url`.", error_type="validation_error",
                             hint="Send the page's http(s) address in `url`.")
        fetcher = GuardedFetcher.for_context(self.context, timeout=self.settings.url_timeout,
                                             max_bytes=self.settings.url_max_bytes)
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
                             hint=f"Pages of up to {self.settings.url_max_bytes} bytes are read.") from None
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
        return await self.extract(result.body, content_type, charset), result.url

    async def extract(self, data: bytes, content_type: str, charset: str | None = None) -> extraction.Extracted:
        """PDF, Word and HTML are read in a child process with CPU-time and memory limits
        (isolation.py); text types, a linear decode, here."""
        settings = self.settings
        limits = extraction.Limits(max_part_bytes=settings.extract_max_part_bytes,
                                   max_unpacked_bytes=settings.extract_max_unpacked_bytes,
                                   max_ratio=settings.extract_max_ratio,
                                   max_pdf_content_bytes=settings.extract_max_pdf_content_bytes)
        try:
            if extraction.needs_isolation(content_type):
                return cast(extraction.Extracted, await self.in_executor(
                    isolation.extract_isolated, data, content_type, charset, limits,
                    settings.extract_cpu_seconds, settings.extract_memory_bytes))
            extracted = await self.in_executor(
                lambda: extraction.extract(data, content_type, charset=charset))
            return cast(extraction.Extracted, extracted)
        except extraction.UnsupportedDocumentType:
            raise unsupported_document_type(content_type) from None
        except extraction.UnreadableDocument as error:
            raise BadRequest(f"The document cannot be read: {error}.", error_type="unreadable_document",
                             hint="Check that the file opens, and is not protected by a password.") from None
        except extraction.DocumentTooComplex as error:
            raise document_too_complex(error) from None


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
