"""Chat attachments to URLs the AI core can fetch: a `file_id` becomes a short-lived signed
download URL of the stored file (no user token leaves the gateway), a data URI passes as
given, a relative path is completed with the public base URL. A `document` attachment (a file
the page put into the conversation's knowledge base) is only checked to be the sender's: the
assistant reaches it by searching that base, not by a URL."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import BadRequest
from gateway.identity import ADMIN_USER_ID
from plugins.files.contract import FILES

if TYPE_CHECKING:
    from gateway.context import Context


def peer_base_url(context: "Context") -> str:
    """Where the AI core reaches this gateway for signed downloads: the peers' gateway address
    (services talk to each other there), else PUBLIC_BASE_URL."""
    settings = context.config.settings
    return (settings.peers.gateway_url or settings.core.public_base_url).rstrip("/")


def public_base_url(context: "Context") -> str:
    return context.config.settings.core.public_base_url.rstrip("/")


async def _owned_file(context: "Context", user_id: str, file_id: str) -> tuple[Any, dict]:
    """The files contract and the stored file, when it is the sender's (the administrator's: any)."""
    files = context.contracts.get(FILES)
    if files is None:
        raise BadRequest("Attachments by file_id need the files plugin in this service.",
                         error_type="attachment_unavailable")
    record = await files.find(file_id)
    if record is None or (record["user_id"] != user_id and user_id != ADMIN_USER_ID):
        raise BadRequest(f"No file {file_id} for this attachment.", error_type="file_not_found",
                         hint="Upload it with POST /api/v1/files/upload and send the returned id.")
    return files, record


async def resolve_attachments(context: "Context", user_id: str, attachments: list[dict], ttl: int) -> list[dict]:
    resolved = []
    for attachment in attachments or []:
        kind = attachment.get("type") or "image"
        file_id = attachment.get("file_id")
        url = attachment.get("url") or ""
        if kind == "document":
            # A document went into the conversation's knowledge base (the page added it there):
            # the assistant finds it by searching, so no download URL is made; the file must be
            # the sender's all the same.
            if not file_id:
                raise BadRequest("A document attachment needs the file_id of the uploaded file.",
                                 error_type="invalid_attachment")
            await _owned_file(context, user_id, str(file_id))
            resolved.append({key: value for key, value in attachment.items() if key != "url" and value is not None})
            continue
        if kind != "image":
            raise BadRequest(f"Unknown attachment type {kind!r}.", error_type="invalid_attachment",
                             hint="Attachments are of type image or document.")
        if file_id:
            files, record = await _owned_file(context, user_id, str(file_id))
            url = files.signed_download_url(str(record["id"]), ttl, base_url=peer_base_url(context))
        elif url.startswith("data:"):
            pass
        elif url.startswith(("http://", "https://")):
            pass
        elif url.startswith("/"):
            base = public_base_url(context)
            if not base:
                raise BadRequest("A relative attachment URL needs PUBLIC_BASE_URL to be configured.",
                                 error_type="invalid_attachment")
            url = base + url
        else:
            raise BadRequest("An attachment needs a file_id, a data URI, an http(s) URL or a path.",
                             error_type="invalid_attachment")
        item = {key: value for key, value in attachment.items() if key not in {"url"} and value is not None}
        item.update({"type": kind, "url": url})
        resolved.append(item)
    return resolved
