"""Image attachments as the model wants them: base64 data URIs. A data URI is checked and kept;
an http(s) URL is fetched through a guarded fetcher — http(s) only, every resolved address
checked (never link-local or cloud metadata; loopback and private ranges only for the
gateway's own address or when the operator allowed them), every redirect checked again, time
and size bounded."""
from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import re
import socket
from urllib.parse import urljoin, urlsplit

import aiohttp

from gateway.errors import BadRequest

_DATA_URI = re.compile(r"^data:(image/[A-Za-z0-9.+-]+)(;[^,]*)?,(.*)$", re.DOTALL)
MAX_REDIRECTS = 3


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
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)


class ImageFetcher:
    def __init__(self, http: aiohttp.ClientSession, *, trusted_origins: set[tuple[str, int]],
                 allow_private: bool, max_bytes: int, timeout: float):
        self.http = http
        # (host, port) of the gateway, whose file download URLs are on a private address.
        self.trusted_origins = trusted_origins
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def as_data_uri(self, reference: str) -> str:
        loop = asyncio.get_running_loop()
        if reference.startswith("data:"):
            return await loop.run_in_executor(None, _decode_data_uri, reference, self.max_bytes)
        content_type, raw = await self.fetch(reference)
        return await loop.run_in_executor(None, _encode, content_type, raw)

    async def _check_address(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ImageError("only http(s) image URLs and data URIs are accepted")
        host = parts.hostname.lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise ImageError(f"cannot resolve {host}: {error}") from None
        for info in infos:
            address = ipaddress.ip_address(info[4][0].split("%", 1)[0])
            if address.is_link_local or address.is_multicast or address.is_unspecified or address.is_reserved:
                raise ImageError(f"{host} resolves to {address}, which is never fetched")
            if (address.is_loopback or address.is_private) and not (
                    self.allow_private or (host, port) in self.trusted_origins):
                raise ImageError(f"{host} resolves to the private address {address}; "
                                 f"allow it with plugins.ai_core.fetch_allow_private")

    async def fetch(self, url: str) -> tuple[str, bytes]:
        try:
            async with asyncio.timeout(self.timeout):
                for _ in range(MAX_REDIRECTS + 1):
                    await self._check_address(url)
                    async with self.http.get(url, allow_redirects=False) as response:
                        if response.status in (301, 302, 303, 307, 308) and "Location" in response.headers:
                            url = urljoin(url, response.headers["Location"])
                            continue
                        if response.status != 200:
                            raise ImageError(f"fetching the image answered HTTP {response.status}")
                        content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
                        if not content_type.startswith("image/"):
                            raise ImageError(f"the URL is not an image ({content_type or 'no type'})")
                        raw = bytearray()
                        async for block in response.content.iter_chunked(65536):
                            raw += block
                            if len(raw) > self.max_bytes:
                                raise ImageError(f"the image is larger than {self.max_bytes} bytes")
                        return content_type, bytes(raw)
                raise ImageError("too many redirects")
        except TimeoutError:
            raise ImageError(f"fetching the image took longer than {self.timeout:g}s") from None
        except aiohttp.ClientError as error:
            raise ImageError(f"cannot fetch the image: {error}") from None


def bad_image(error: ImageError) -> BadRequest:
    return BadRequest(f"Image attachment rejected: {error}", error_type="invalid_image",
                      hint="Send a data:image/...;base64 URI or an http(s) URL of an image.")
