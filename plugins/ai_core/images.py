"""Image attachments as the model wants them: base64 data URIs. A data URI is checked and kept;
an http(s) URL is fetched through a guarded fetcher — http(s) only, every resolved address
checked (never link-local or cloud metadata; loopback and private ranges only for the
gateway's own address or when the operator allowed them), every redirect checked again, time
and size bounded."""
from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import re
from urllib.parse import urlsplit

from gateway.errors import BadRequest
from gateway.fetch import FetchError, FetchRefused, FetchTimeout, FetchTooLarge, GuardedFetcher
from gateway.fetch_policy import FetchPolicy

log = logging.getLogger("plugins.ai_core.images")

_DATA_URI = re.compile(r"^data:(image/[A-Za-z0-9.+-]+)(;[^,]*)?,(.*)$", re.DOTALL)


class ImageError(Exception):
    """An attachment that cannot be handed to a model; the message says why."""


def _decode_data_uri(uri: str, max_bytes: int) -> str:
    match = _DATA_URI.match(uri)
    if not match or ";base64" not in (match.group(2) or ""):
        raise ImageError("a data URI must look like data:image/<type>;base64,<data>")
    try:
        raw = base64.b64decode(match.group(3), validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the data URI is not valid base64") from None
    if len(raw) > max_bytes:
        raise ImageError(f"the image is larger than {max_bytes} bytes")
    return uri


def _encode(content_type: str, raw: bytes) -> str:
    return f"data:{content_type};base64,{base64.b64encode(raw).decode('ascii')}"


def origin(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)  # raises ValueError for an unclosed `[` (`http://[::1/`)
        port = parts.port  # and for a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


class ImageFetcher:
    """Fetches image URLs through the core's guarded fetcher (`gateway.fetch`), which checks
    every resolved address at connect time and on every redirect. The gateway's own origin,
    whose signed download URLs sit on a private address, is reachable with no redirect allowed."""

    def __init__(self, guarded: GuardedFetcher, *, trusted_origins: set[tuple[str, int]],
                 max_bytes: int, timeout: float):
        self.guarded = guarded
        self.trusted_origins = trusted_origins
        # The trusted fetcher may reach exactly the trusted origins (checked before use) and follows no redirect.
        self.trusted = GuardedFetcher(
            FetchPolicy.build(allow_hosts=[host for host, _ in trusted_origins]),
            max_redirects=0, resolver=guarded.resolver)
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def as_data_uri(self, reference: str) -> str:
        loop = asyncio.get_running_loop()
        if reference.startswith("data:"):
            return await loop.run_in_executor(None, _decode_data_uri, reference, self.max_bytes)
        content_type, raw = await self.fetch(reference)
        return await loop.run_in_executor(None, _encode, content_type, raw)

    async def fetch(self, url: str) -> tuple[str, bytes]:
        """The image's type and bytes. ImageError's text reaches the user: what a URL answered
        (its status, its type, a connection's error) goes to the log only, so the gateway's own
        URLs, fetched with the trusted fetcher, cannot be probed through attachments."""
        fetcher = self.trusted if origin(url) in self.trusted_origins else self.guarded
        try:
            result = await fetcher.fetch(url, timeout=self.timeout, max_bytes=self.max_bytes)
        except FetchTooLarge:
            raise ImageError(f"the image is larger than {self.max_bytes} bytes") from None
        except FetchTimeout:
            raise ImageError(f"fetching the image took longer than {self.timeout:g}s") from None
        except FetchRefused as error:  # the policy's reason, about the URL as given
            raise ImageError(f"{error}; an operator can allow private addresses with "
                             f"plugins.ai_core.fetch_allow_private or [fetch] allow_hosts") from None
        except FetchError as error:
            log.info("an image could not be fetched: %s", error)
            raise ImageError("the image could not be fetched") from None
        content_type = result.headers.get("Content-Type", "").split(";")[0].strip()
        if result.status != 200 or not content_type.startswith("image/"):
            log.info("an image URL answered HTTP %s (%s)", result.status, content_type or "no type")
            raise ImageError("the URL did not answer with an image")
        return content_type, result.body


def bad_image(error: ImageError) -> BadRequest:
    return BadRequest(f"Image attachment rejected: {error}", error_type="invalid_image",
                      hint="Send a data:image/...;base64 URI or an http(s) URL of an image.")
