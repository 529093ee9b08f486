"""One WebSocket connection: who it is, its bounded send queue and the writer that drains it,
and the hold that keeps live frames behind a replay.

Each connection has a bounded send queue drained by its own writer task: a client that stops
reading is disconnected once the queue is full, instead of growing the server's memory (as
Home Assistant's websocket_api does). Frames of a numbered run (a streamed reply, say: `run_id`,
`seq` from 0) carry both in the hub's delivery, so a connection that is being replayed such a run
(see `Connection.hold`) filters live frames without parsing them. The hub (gateway/hub.py)
keeps the connections and delivers to them."""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Coroutine, Generator

from aiohttp import WSCloseCode, web

from .text import dumps_text
from .typedefs import Identity

# The hub's logger: what a connection says is the hub's to say (log filters name it).
log = logging.getLogger("gateway.hub")

DEFAULT_MAX_PENDING = 512


@dataclass(eq=False, slots=True)
class Connection:
    ws: web.WebSocketResponse
    user_id: str
    client_id: str = ""
    device_name: str = ""
    user_agent: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    connected_at: float = field(default_factory=time.time)
    max_pending: int = DEFAULT_MAX_PENDING
    data: dict = field(default_factory=dict)  # per-connection state plugins keep
    identity: Identity | None = None  # who authenticated the handshake (see gateway.ws.require_admin)
    # Write state; slots (not a __dict__) keep an idle connection small.
    _pending: "collections.deque[str] | None" = field(default=None, init=False, repr=False)
    _writer: "asyncio.Task | None" = field(default=None, init=False, repr=False)
    closing: bool = field(default=False, init=False)
    # Replay state: deliveries held while a replay is read, then what the replay covered.
    _held: "list[tuple[str, str | None, int]] | None" = field(default=None, init=False, repr=False)
    _replayed: "dict[str, int] | None" = field(default=None, init=False, repr=False)

    # An idle connection holds no queue and no task: both exist only while something is
    # waiting to be written (bench/chat measures memory per idle connection).

    def send(self, message: dict | str) -> bool:
        """Queue a message without waiting; False (and the connection closes) when it is full."""
        if self.closing:
            return False
        payload = message if isinstance(message, str) else dumps_text(message)
        if self._writer is None:
            return self._write_now(payload)
        pending = self._pending
        assert pending is not None, "a writer task exists only with its queue"  # see _write_now
        if len(pending) >= self.max_pending:
            log.warning("closing WebSocket %s of %s: %d messages unread", self.id[:8], self.user_id,
                        self.max_pending)
            self.closing = True
            asyncio.create_task(self.ws.close(code=WSCloseCode.POLICY_VIOLATION,
                                              message=b"too many unread messages"))
            return False
        pending.append(payload)
        return True

    def deliver(self, payload: str, run_id: str | None = None, seq: int = -1) -> bool:
        """`send` for the hub's deliveries: held while a replay is read (`hold`), dropped when
        the replay already sent that frame of that run."""
        if self._held is not None:
            self._held.append((payload, run_id, seq))
            return True
        if run_id is not None and self._replayed is not None and self._replayed.get(run_id, -1) >= seq:
            return True
        return self.send(payload)

    def hold(self) -> None:
        """Hold deliveries until `release`: a device that resumes reads its replay first, and
        a frame delivered meanwhile must come after the replay (or not at all, when the replay
        had it)."""
        self._held = []

    def release(self, replayed: dict[str, int] | None = None) -> None:
        """Stop holding; from now on drop frames of run `run_id` up to `replayed[run_id]`
        (the replay sent those), then send what was held, in order."""
        held, self._held = self._held or [], None
        if replayed:
            self._replayed = {**(self._replayed or {}), **replayed}
        for payload, run_id, seq in held:
            self.deliver(payload, run_id, seq)

    def _write_now(self, payload: str) -> bool:
        """Write at once when nothing waits before it: a frame is usually written to the socket
        without waiting, and a writer task per frame would cost more than the write (a streamed
        reply sends dozens per second per device). Only a write that must wait (the socket's
        buffer is full) leaves a writer behind to finish it and drain what queues meanwhile."""
        write = self.ws.send_str(payload)
        try:
            waiting_on = write.send(None)
        except StopIteration:
            return True
        except (ConnectionResetError, RuntimeError):
            self.closing = True
            return False
        except UnicodeEncodeError:
            return self._write_now(_encodable(payload))
        self._pending = collections.deque()
        writer = asyncio.create_task(self._write(_Resumed(write, waiting_on)), name=f"ws-writer-{self.id[:8]}")
        # A writer cancelled before its first step never runs its `finally`: close the write it owns.
        writer.add_done_callback(lambda _: write.close())
        self._writer = writer
        return True

    async def _write(self, unfinished: "_Resumed | None" = None) -> None:
        """Finish the write that had to wait, then drain what is pending, in order, then end;
        the next send writes at once again."""
        try:
            if unfinished is not None:
                try:
                    await unfinished
                except (ConnectionResetError, RuntimeError):
                    self.closing = True
                    return
            while self._pending:
                payload = self._pending.popleft()
                try:
                    try:
                        await self.ws.send_str(payload)
                    except UnicodeEncodeError:
                        await self.ws.send_str(_encodable(payload))
                except (ConnectionResetError, RuntimeError):
                    self.closing = True
                    return
        finally:
            self._writer = None
            if not self._pending:
                self._pending = None

    async def stop(self) -> None:
        self.closing = True
        writer = self._writer
        if writer is not None:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        self._writer = self._pending = None

    def describe(self) -> dict[str, Any]:
        return {"connection_id": self.id, "user_id": self.user_id, "client_id": self.client_id,
                "device_name": self.device_name, "user_agent": self.user_agent,
                "connected_at": int(self.connected_at * 1000)}


def _encodable(text: str) -> str:
    """`text` with what UTF-8 cannot carry (half of a surrogate pair, which JSON may escape)
    replaced by `?`, so the frame still goes out."""
    return text.encode("utf-8", "replace").decode("utf-8")


class _Resumed:
    """A coroutine that already ran up to its first wait, continued where it stopped when
    awaited (Python 3.12's eager tasks do this; this code also runs on 3.11).

    The future the coroutine waits on may be shared (aiohttp's drain waiter is one per
    connection, and closing the socket waits on it too), so it is never handed to the task
    itself: the task waits on a future of its own that completes with it, then the coroutine
    goes on and reads the shared future's outcome as it would have."""

    __slots__ = ("coroutine", "waiting_on")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self.coroutine, self.waiting_on = coroutine, waiting_on

    def __await__(self) -> Generator[Any, None, Any]:
        coroutine, waiting_on = self.coroutine, self.waiting_on
        while True:
            try:
                if asyncio.isfuture(waiting_on):
                    yield from _when_done(waiting_on).__await__()
                else:
                    yield waiting_on  # a bare yield (asyncio.sleep(0))
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as error:  # cancelled while waiting: the coroutine decides
                try:
                    waiting_on = coroutine.throw(error)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting_on = coroutine.send(None)
                except StopIteration as done:
                    return done.value


def _when_done(future: asyncio.Future[Any]) -> asyncio.Future[None]:
    """A future of our own that completes (with nothing) when `future` does."""
    mine: asyncio.Future[None] = future.get_loop().create_future()

    def done(_: asyncio.Future[Any]) -> None:
        if not mine.done():
            mine.set_result(None)

    future.add_done_callback(done)
    mine.add_done_callback(lambda _: future.remove_done_callback(done))
    return mine
