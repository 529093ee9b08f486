"""Reading server-sent events (WHATWG rules), for every plugin that consumes a stream: a
model provider's, or the AI core's chat call."""
from __future__ import annotations

from typing import AsyncIterator

import aiohttp


# A line this long without its end is not a server-sent event stream (a model's single event
# can be large, more than aiohttp's readline limit of 128 KiB). It bounds what one event may
# carry: the AI core's `done` event holds a whole reply, so a reply must stay well under it
# (plugins.chat's max_reply_chars does; docs/chat.md, "Limits").
MAX_LINE = 8 * 2**20


class EventTooLarge(ValueError):
    """A line of the stream grew past the decoder's limit: the stream cannot be read on."""

    def __init__(self, limit: int):
        super().__init__(f"a server-sent event line is longer than {limit} bytes")
        self.limit = limit


class SseDecoder:
    """Server-sent events, line by line: `data:` lines of one event are joined with newlines,
    comments and other fields are ignored, a blank line ends the event."""

    def __init__(self, errors: str = "strict", max_line: int = MAX_LINE):
        self._data: list[str] = []
        self._errors = errors  # how undecodable UTF-8 is handled, as for bytes.decode
        self._partial: list[bytes] = []  # pieces of a line whose end has not arrived
        self._partial_size = 0
        self._max_line = max_line

    def feed(self, chunk: bytes) -> list[str]:
        """The data of the events a chunk of the body completes (usually one per chunk, so a
        stream costs one read per event instead of one per line)."""
        if b"\n" not in chunk:  # only the new piece is searched: a long line costs its length once
            self._partial.append(chunk)
            self._partial_size += len(chunk)
            lines = []
        else:
            lines = chunk.split(b"\n")
            if self._partial:
                lines[0] = b"".join(self._partial) + lines[0]
            tail = lines.pop()
            self._partial, self._partial_size = ([tail], len(tail)) if tail else ([], 0)
        if self._partial_size > self._max_line:
            raise EventTooLarge(self._max_line)
        events = []
        for raw in lines:
            data = self.feed_line(raw)
            if data is not None:
                events.append(data)
        return events

    def feed_line(self, raw: bytes) -> str | None:
        if raw.startswith(b"data:"):  # most lines: only the value is decoded (`data` is ASCII)
            value_bytes = raw[5:].rstrip(b"\r\n")
            if value_bytes.startswith(b" "):
                value_bytes = value_bytes[1:]
            self._data.append(value_bytes.decode("utf-8", self._errors))
            return None
        if raw.startswith(b"event:"):  # a field this decoder ignores, as below
            return None
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
        if self._partial:
            self.feed_line(b"".join(self._partial))
            self._partial, self._partial_size = [], 0
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data


async def sse_data(content: aiohttp.StreamReader, *, errors: str = "strict") -> AsyncIterator[str]:
    """The data of each complete event of a response body; an event cut off by the end of the
    stream is dropped, as the standard says."""
    decoder = SseDecoder(errors)
    async for chunk in content.iter_any():
        for data in decoder.feed(chunk):
            yield data
