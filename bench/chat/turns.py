"""One turn as a client sees it (straight from the mock's SSE, or through a relay's WebSocket),
and the CPU time a server spent, read precisely enough for a turn of a few milliseconds."""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import time
import uuid
from typing import AsyncIterator

import aiohttp

from bench.chat.processes import access_token
from bench.chat.servers import DELTAS, SERVICE_TOKEN

async def direct_turn(http: aiohttp.ClientSession, url: str) -> tuple[float, list[float]]:
    """(seconds to the first delta, gaps between deltas) of one SSE read straight from the mock."""
    started = time.perf_counter()
    stamps: list[float] = []
    async with http.post(url, json={"user_id": "bench", "text": "hello", "history": []},
                         headers={"Authorization": f"Bearer {SERVICE_TOKEN}", "Accept": "text/event-stream"}) as response:
        assert response.status == 200, response.status
        data: list[str] = []
        async for raw in response.content:  # parsed the way the chat plugin parses it
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif not line and data:
                event = json.loads("\n".join(data))
                data = []
                if event.get("type") == "delta":
                    stamps.append(time.perf_counter())
                elif event.get("type") == "done":
                    break
    assert len(stamps) == DELTAS, len(stamps)
    return stamps[0] - started, [b - a for a, b in zip(stamps, stamps[1:])]


async def gateway_turn(ws: aiohttp.ClientWebSocketResponse, session_id: str, deltas: int = DELTAS
                       ) -> tuple[float, list[float]]:
    """(seconds from the `message` frame to the first `stream_chunk`, gaps between chunks)."""
    stamps: list[float] = []
    started = time.perf_counter()
    await ws.send_str(json.dumps({"type": "message", "content": "hello", "client_msg_id": uuid.uuid4().hex}))
    while True:
        message = await ws.receive(timeout=60)
        now = time.perf_counter()
        if message.type != aiohttp.WSMsgType.TEXT:
            raise RuntimeError(f"WebSocket of {session_id}: {message.type} {message.data!r}")
        frame = json.loads(message.data)
        kind = frame.get("type")
        if kind == "stream_chunk":
            stamps.append(now)
        elif kind == "stream_end":
            if frame.get("finish_reason") == "error":
                raise RuntimeError(f"turn of {session_id} failed: {frame}")
            break
        elif kind == "error":
            raise RuntimeError(f"turn of {session_id}: {frame}")
    assert len(stamps) == deltas, len(stamps)
    return stamps[0] - started, [b - a for a, b in zip(stamps, stamps[1:])]



class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def cpu_seconds(pid: int) -> float:
    """The process's CPU time (user and system, every thread) to the nanosecond, from its CPU
    clock (clock_getcpuclockid). psutil's user and system times come in clock ticks (10 ms here),
    so a turn of a few milliseconds measured one at a time was rounded by a tick at each end:
    over 45 turns a few percent of noise on each side of a ratio. psutil's figure where the
    clock cannot be had."""
    clock = ctypes.c_int()
    clock_of = getattr(_LIBC, "clock_getcpuclockid", None)  # not in every libc (macOS)
    if clock_of is not None and clock_of(pid, ctypes.byref(clock)) == 0:
        now = _Timespec()
        if _LIBC.clock_gettime(clock, ctypes.byref(now)) == 0:
            return now.tv_sec + now.tv_nsec / 1e9
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system



def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU time of these processes and everything they started (workers, the embedded bus)."""
    import psutil

    total = 0.0
    for pid in pids:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            try:
                total += cpu_seconds(process.pid)
            except psutil.NoSuchProcess:
                continue
    return total


@contextlib.asynccontextmanager
async def open_sessions(http: aiohttp.ClientSession, url: str, count: int, prefix: str
                        ) -> AsyncIterator[list[tuple[aiohttp.ClientWebSocketResponse, str]]]:
    """`count` WebSockets to `url` (its `{token}` and `{session}` filled in), each of its own user
    and session (`<prefix>_<n>`), as (socket, session id); closed on leaving."""
    sockets: list[tuple[aiohttp.ClientWebSocketResponse, str]] = []
    try:
        for index in range(count):
            session = f"{prefix}_{index}"
            sockets.append((await http.ws_connect(url.format(token=access_token(f"user_{session}"), session=session),
                                                  max_msg_size=0), session))
        yield sockets
    finally:
        await asyncio.gather(*(ws.close() for ws, _ in sockets), return_exceptions=True)
