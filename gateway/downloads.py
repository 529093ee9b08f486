"""Serving stored bytes to a client: links signed to work without a bearer token until they
expire, single byte ranges, and the range-capable answer itself (`send_blob`). Shared by every plugin that hands out downloads (files, spoken
replies), so a link and a range mean the same everywhere."""
from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Callable, Mapping

from aiohttp import web

from .blobs import BlobNotFound, BlobStore
from .config import Config
from .errors import ApiError

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
# A byte position past every stored size; a longer one is read as this, never given to int() (past
# 4,300 digits int() raises ValueError, and reading any long one costs time for nothing).
BEYOND_ANY_SIZE = 10**18


class LinkSigner:
    """HMAC signatures of `(subject, expires)` for one `purpose`. The key is derived from the JWT
    secret and the purpose, so a link's signature is never a token and a link signed for one
    purpose does not open another's."""

    def __init__(self, config: Config, purpose: str):
        self.config, self.purpose = config, purpose

    def _signature(self, subject: str, expires: int) -> str:
        secret = self.config.settings.auth.jwt_secret.encode()
        key = hashlib.sha256(self.purpose.encode() + b":" + secret).digest()
        return hmac.new(key, f"{subject}:{expires}".encode(), hashlib.sha256).hexdigest()

    def query(self, subject: str, ttl: int) -> str:
        """`expires=...&signature=...`: the query string that opens `subject` for `ttl` seconds."""
        expires = int(time.time()) + int(ttl)
        return f"expires={expires}&signature={self._signature(subject, expires)}"

    def valid(self, subject: str, query: Mapping[str, str]) -> bool:
        """Whether `query` carries an unexpired signature of `subject`."""
        try:
            expires = int(query.get("expires", ""))
        except ValueError:
            return False
        expected = self._signature(subject, expires)
        # As bytes: compare_digest refuses str holding anything but ASCII, and the query is the caller's.
        signature = query.get("signature", "").encode("utf-8", "surrogatepass")
        return expires >= time.time() and hmac.compare_digest(expected.encode(), signature)


def _position(digits: str) -> int:
    """A range's decimal position, as RFC 9110 reads it: any length, leading zeros allowed; one
    of more than 18 significant digits is `BEYOND_ANY_SIZE` (the same answer: past the end)."""
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= 18 else BEYOND_ANY_SIZE


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a single byte range; None to send everything (no header, or
    several ranges, which HTTP lets a server answer whole). Unsatisfiable ranges raise 416.
    Positions of any length are read (RFC 9110 14.1.2): a last position past the end means the
    end (`bytes=0-<5,000 digits>` is the whole file, 206), a first one past it is a 416."""
    match = _RANGE.match(header.strip()) if header else None
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        length = _position(last)
        start, end = max(0, size - length), size
        if length == 0:
            start = size
    else:
        start = _position(first)
        end = min(size, _position(last) + 1) if last else size
        if last and _position(last) < start:
            return None
    if start >= size or start >= end:
        raise ApiError(f"The range {header!r} is outside the file's {size} bytes.",
                       error_type="range_not_satisfiable", status=416,
                       headers={"Content-Range": f"bytes */{size}"})
    return start, end


async def send_blob(request: web.Request, blobs: BlobStore, key: str, size: int, headers: Mapping[str, str], *,
                    missing: Callable[[], ApiError]) -> web.StreamResponse:
    """Answer with stored blob `key` of `size` bytes: whole (200) or the single range asked for
    (206 with Content-Range; 416 outside it), HEAD without the body. `headers`: the content's own
    (type, caching, safety). `missing()` is raised when the blob went between the size check
    and the read, before anything is sent."""
    byte_range = parse_range(request.headers.get("Range", ""), size)
    start, end = byte_range or (0, size)
    response = web.StreamResponse(status=206 if byte_range else 200,
                                  headers={**headers, "Accept-Ranges": "bytes"})
    if byte_range:
        response.headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    response.content_length = end - start
    if request.method == "HEAD":
        await response.prepare(request)
        return response
    chunks = blobs.read(key, start, end)
    try:
        first = await chunks.__anext__() if end > start else b""
    except StopAsyncIteration:
        first = b""
    except BlobNotFound:
        raise missing() from None
    await response.prepare(request)
    await response.write(first)
    async for chunk in chunks:
        await response.write(chunk)
    await response.write_eof()
    return response
