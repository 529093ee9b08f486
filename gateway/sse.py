"""Reading server-sent events (WHATWG rules), for every plugin that consumes a stream: a
model provider's, or the AI core's chat call."""
from __future__ import annotations

from typing import AsyncIterator

import aiohttp


class SseDecoder:
    """Server-sent events, line by line: `data:` lines of one event are joined with newlines,
    comments and other fields are ignored, a blank line ends the event."""

    def __init__(self, errors: str = "strict"):
        self._data: list[str] = []
        self._errors = errors  # how undecodable UTF-8 is handled, as for bytes.decode

    def feed_line(self, raw: bytes) -> str | None:
        line = raw.decode("utf-8", self._errors).rstrip("\r\n")
        if not line:
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        return None

    def finish(self) -> str | None:
        """The last event when the stream ended without its blank line."""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data


async def sse_data(content: aiohttp.StreamReader, *, errors: str = "strict") -> AsyncIterator[str]:
    """The data of each complete event of a response body; an event cut off by the end of the
    stream is dropped, as the standard says."""
    decoder = SseDecoder(errors)
    async for raw in content:
        data = decoder.feed_line(raw)
        if data is not None:
            yield data
