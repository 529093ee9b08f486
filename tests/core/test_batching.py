"""gateway.batching.Batcher: writes submitted while one is written go out together, in order,
each with its own outcome."""
import asyncio

import pytest

from gateway.batching import Batcher


class Recorder:
    """A write that takes a moment and records every call: how the items were grouped."""

    def __init__(self, refuse: set[int] = frozenset()):
        self.calls: list[list[int]] = []
        self.refuse = refuse

    async def one(self, item: int) -> int:
        self.calls.append([item])
        await asyncio.sleep(0.01)
        if item in self.refuse:
            raise ValueError(f"refused {item}")
        return item * 10

    async def many(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        await asyncio.sleep(0.01)
        if self.refuse & set(items):
            raise ValueError("a batch with a refused item")
        return [item * 10 for item in items]


async def test_a_lone_write_goes_out_alone_and_the_next_ones_wait_and_go_together():
    recorder = Recorder()
    batcher = Batcher(recorder.one, recorder.many, max_batch=3)
    first = batcher.submit(1)
    await asyncio.sleep(0)  # the first is being written
    rest = [batcher.submit(item) for item in range(2, 7)]
    assert await asyncio.gather(first, *rest) == [10, 20, 30, 40, 50, 60]
    assert recorder.calls == [[1], [2, 3, 4], [5, 6]]


async def test_a_failed_batch_is_written_item_by_item_so_the_error_is_one_items():
    recorder = Recorder(refuse={3})
    batcher = Batcher(recorder.one, recorder.many)
    blocker = batcher.submit(1)
    await asyncio.sleep(0)
    results = await asyncio.gather(blocker, *(batcher.submit(item) for item in (2, 3, 4)), return_exceptions=True)
    assert results[:2] == [10, 20] and results[3] == 40
    assert isinstance(results[2], ValueError)
    assert recorder.calls == [[1], [2, 3, 4], [2], [3], [4]]


async def test_a_cancelled_submitter_does_not_take_its_item_back():
    recorder = Recorder()
    batcher = Batcher(recorder.one, recorder.many)
    blocker = batcher.submit(1)
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(batcher.submit(2))
    kept = batcher.submit(3)
    await asyncio.sleep(0)
    waiting.cancel()
    assert await blocker == 10 and await kept == 30
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert recorder.calls == [[1], [2, 3]]
