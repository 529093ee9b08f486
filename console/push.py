"""The console's server-push channel (`/ws`) and the speech-recognition log it relays.

Every message is one JSON object with a `type` (`log`, `status` or `stt-log`); docs/console.md
lists the payloads. Listeners (the WebSocket clients, and tests) receive the same dicts."""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from typing import Any, Callable

from aiohttp import web

log = logging.getLogger("console.push")

STT_LOG_SIZE = 200
# How a recognition record appears in a service's log output (`<time> INFO voice.stt: {json}`).
STT_RECORD_MARKER = " voice.stt: "


class PushHub:
    def __init__(self) -> None:
        self._sockets: set[web.WebSocketResponse] = set()
        self._listeners: list[Callable[[dict], None]] = []
        self._sending: set[asyncio.Task] = set()  # held so that no send is collected half-way

    @property
    def client_count(self) -> int:
        return len(self._sockets)

    def add_listener(self, listener: Callable[[dict], None]) -> Callable[[], None]:
        """Call `listener(message)` for every push; returns the function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def publish(self, message: dict[str, Any]) -> None:
        """Send without waiting: a slow browser must never hold up a service's log reader."""
        for listener in list(self._listeners):
            listener(message)
        for socket in list(self._sockets):
            if socket.closed:
                self._sockets.discard(socket)
                continue
            task = asyncio.ensure_future(self._send(socket, message))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, socket: web.WebSocketResponse, message: dict) -> None:
        try:
            await socket.send_json(message)
        except (ConnectionError, RuntimeError) as error:
            log.debug("dropping a console WebSocket client: %r", error)
            self._sockets.discard(socket)

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(heartbeat=30)
        await socket.prepare(request)
        self._sockets.add(socket)
        try:
            async for _ in socket:  # server push only; whatever a client sends is ignored
                pass
        finally:
            self._sockets.discard(socket)
        return socket

    async def close_all(self) -> None:
        for socket in list(self._sockets):
            await socket.close(code=1001, message=b"console stopping")
        self._sockets.clear()


class SttLog:
    """The last 200 speech-recognition results the console saw, newest last; each addition is
    pushed as an `stt-log` message."""

    def __init__(self, hub: PushHub, size: int = STT_LOG_SIZE):
        self._hub = hub
        self._entries: collections.deque[dict] = collections.deque(maxlen=size)

    def add(self, text: str, processing_ms: float, **details: Any) -> dict:
        entry = {"time": time.time(), "text": text, "processingMs": round(float(processing_ms), 1), **details}
        self._entries.append(entry)
        self._hub.publish({"type": "stt-log", "entry": entry})
        return entry

    def entries(self) -> list[dict]:
        return list(self._entries)

    @property
    def size(self) -> int:
        """The most entries kept."""
        return self._entries.maxlen or 0

    def read_service_line(self, service_id: str, line: str) -> dict | None:
        """Add the entry a service's log line carries, if it is a `voice.stt` record (the voice
        service logs one per recognition: docs/voice.md, "The STT log"); None for other lines."""
        _, marker, payload = line.partition(STT_RECORD_MARKER)
        if not marker:
            return None
        try:
            record = json.loads(payload)
        except ValueError:
            return None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            return None
        processing_ms = record.pop("processing_ms", 0)
        text = record.pop("text")
        if not isinstance(processing_ms, (int, float)) or isinstance(processing_ms, bool):
            processing_ms = 0
        return self.add(text, processing_ms, service=service_id, **record)
