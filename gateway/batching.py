"""Writes of many tasks in one round trip: while one batch is written, what other tasks submit
waits and goes out together in the next.

A statement costs the process far more than a row does (bench/chat: about 180 µs of CPU for a
one-row INSERT through aiopg, 30 µs a row in a batch of 50). Hundreds of chat turns starting at
once each write a few rows; written one statement each, those writes take CPU from every other
turn's first token. Alone (no write in flight) a write goes out at once, as it would without
the batcher, so a quiet service sees no delay."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Awaitable, Callable, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Batcher(Generic[Item, Result]):
    """`await submit(item)` → the item's result. Items submitted while a batch is being written
    wait for it, then go out together (at most `max_batch` at a time, in submission order):
    `write_one(item)` for a batch of one, `write_many(items)` (a result per item, in order)
    otherwise. A batch that fails is written again item by item (concurrently), so one item's
    error (a row the database refuses) is its own and the others still go in.

    A submitter that is cancelled does not take its item back: once submitted, it is written."""

    def __init__(self, write_one: Callable[[Item], Awaitable[Result]],
                 write_many: Callable[[list[Item]], Awaitable[list[Result]]], *, max_batch: int = 64):
        self._write_one, self._write_many, self._max_batch = write_one, write_many, max_batch
        self._pending: list[tuple[Item, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None

    @property
    def backlog(self) -> int:
        """How many submitted items wait for the batch under way."""
        return len(self._pending)

    def submit(self, item: Item) -> "asyncio.Future[Result]":
        future = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="batched-writes")
        return future

    async def close(self, drain: float = 2.0) -> None:
        """Lets the batch under way finish (for at most `drain` seconds), then cancels what is
        left, so nothing writes (and opens a connection) after its owner has closed."""
        writer = self._writer
        if writer is None:
            return
        await asyncio.wait({writer}, timeout=drain)
        if not writer.done():
            writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer

    async def _write(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[:self._max_batch], self._pending[self._max_batch:]
                await self._write_batch(batch)
        finally:
            self._writer = None
            if self._pending:  # cancelled with items waiting: they are not written
                for _, future in self._pending:
                    future.cancel()
                self._pending = []

    async def _write_batch(self, batch: list[tuple[Item, asyncio.Future]]) -> None:
        items = [item for item, _ in batch]
        try:
            if len(batch) == 1:
                results: list = [await self._write_one(items[0])]
            else:
                try:
                    results = await self._write_many(items)
                except Exception:  # one item may be to blame: each on its own
                    results = await asyncio.gather(*map(self._write_one, items), return_exceptions=True)
        except BaseException as error:  # a batch of one failed, or the writer was cancelled
            for _, future in batch:
                if not future.done():
                    future.cancel() if isinstance(error, asyncio.CancelledError) else future.set_exception(error)
            if isinstance(error, asyncio.CancelledError):
                raise
            return
        for (_, future), result in zip(batch, results):
            if future.done():  # its submitter was cancelled
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
