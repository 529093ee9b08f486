"""The AI core's streaming chat call, read as typed SSE events (`async for event in
ai.stream(body)` yields dicts). Failures raise AiStreamError with the errorType devices see."""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, AsyncIterator

import aiohttp
import orjson
import yarl

from gateway.sse import sse_data
from gateway.text import loads_utf8_safe

if TYPE_CHECKING:
    from gateway.context import Context


class AiStreamError(Exception):
    def __init__(self, error: str, error_type: str = "ai_core_failed"):
        super().__init__(error)
        self.error, self.error_type = error, error_type


class AiCoreClient:
    def __init__(self, context: "Context", read_timeout: float):
        self.context = context
        self.timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=read_timeout)
        self._target: tuple[yarl.URL, dict] | None = None

    def target(self) -> tuple[yarl.URL, dict]:
        """The URL, parsed once, and the headers of every call (the configuration does not change
        while the service runs): a turn's request goes out a little sooner."""
        if self._target is None:
            self._target = (yarl.URL(self.context.peer_url("ai_core") + "/api/v1/chat/stream"),
                            {**self.context.peer_headers(), "Accept": "text/event-stream",
                             "Content-Type": "application/json"})
        return self._target

    async def stream(self, body: dict) -> AsyncIterator[dict]:
        try:
            url, headers = self.target()
            async with self.context.http.post(url, data=_encode_body(body), headers=headers,
                                              timeout=self.timeout) as response:
                if response.status != 200:
                    text = (await response.text())[:500]
                    try:
                        text = json.loads(text).get("error") or text
                    except (ValueError, AttributeError):
                        pass
                    raise AiStreamError(f"the AI core answered {response.status}: {text}")
                async for data in sse_data(response.content, errors="replace"):
                    try:
                        event = loads_utf8_safe(data)
                    except ValueError:
                        raise AiStreamError("the AI core sent an unreadable event") from None
                    if isinstance(event, dict):
                        yield event
        except (aiohttp.ClientError, asyncio.TimeoutError, RuntimeError) as error:  # RuntimeError: aiohttp's
            # "Connection closed." when the AI core closes the response while it is read
            raise AiStreamError(f"the AI core cannot be reached or stopped answering ({error.__class__.__name__}"
                                f"{': ' + str(error) if str(error) else ''})", "ai_core_unreachable") from None
        except ValueError as error:  # a line of the stream that never ends
            raise AiStreamError(f"the AI core sent an unreadable stream: {error}") from None


def _encode_body(body: dict) -> bytes:
    """The request body; orjson writes a turn's history several times faster than json, which
    counts on the way to the first token. orjson refuses a lone surrogate (a client may send
    one escaped in JSON); json writes it escaped, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()
