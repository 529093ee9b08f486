"""The embedded store taken over by a rolling restart's replacement (gateway/edge_engine.py): two
engines on one directory in one process stand for the two processes (flock locks belong to the
open file, so a second open of `.lock` is refused like another process's)."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from gateway.edge_engine import EdgeEngine
from gateway.lexical import SparseVector
from gateway.vector_store import StoredPoint, VectorStoreUnavailable


def points(count: int) -> list[StoredPoint]:
    return [StoredPoint(str(uuid.uuid4()), [1.0, float(n), 0.5, 0.25], SparseVector([n + 1], [1.0]),
                        {"user_id": "u"}) for n in range(count)]


async def stored(directory, count: int) -> EdgeEngine:
    engine = EdgeEngine(directory)
    await engine.create("kb", 4, ["user_id"])
    await engine.upsert("kb", points(count))
    return engine


async def test_a_replacement_serves_and_its_calls_wait_until_the_old_engine_closes(tmp_path):
    old = await stored(tmp_path / "v", 3)
    with pytest.raises(VectorStoreUnavailable, match="in use by another process"):
        EdgeEngine(tmp_path / "v")  # not a replacement: refused at once, as before
    new = EdgeEngine(tmp_path / "v", take_over_within=30)
    try:
        assert new.taking_over
        counting = asyncio.ensure_future(new.count("kb", None))
        querying = asyncio.ensure_future(new.query("kb", [1.0, 0.0, 0.5, 0.25], None, {"user_id": "u"}, 5))
        await asyncio.sleep(0.5)
        assert not counting.done() and not querying.done()
        await old.upsert("kb", points(2))  # the old process writes on while it drains
        closed = time.monotonic()
        await old.close()
        assert await counting == 5  # what the old one wrote last was flushed before it let go
        assert len((await querying)[0]) == 5
        assert time.monotonic() - closed < 1.0
        assert not new.taking_over
        await new.upsert("kb", points(1))
        assert await new.count("kb", None) == 6
    finally:
        await new.close()


async def test_a_replacement_gives_up_after_its_deadline_and_tries_again_later(tmp_path, caplog):
    old = await stored(tmp_path / "v", 2)
    new = EdgeEngine(tmp_path / "v", take_over_within=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(VectorStoreUnavailable, match="still in use by another process after"):
            await new.count("kb", None)
        assert 0.5 <= time.monotonic() - started < 3.0
        assert not new.taking_over
        assert any("still in use" in record.getMessage() for record in caplog.records
                   if record.levelname == "ERROR")
        started = time.monotonic()
        with pytest.raises(VectorStoreUnavailable, match="still in use"):
            await new.count("kb", None)  # past the deadline: one try, no second wait
        assert time.monotonic() - started < 0.5
        await old.close()
        assert await new.count("kb", None) == 2  # a later call tries the lock again
    finally:
        await new.close()


async def test_a_replacement_closed_while_it_waits_stops_waiting(tmp_path):
    old = await stored(tmp_path / "v", 1)
    new = EdgeEngine(tmp_path / "v", take_over_within=30)
    counting = asyncio.ensure_future(new.count("kb", None))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await new.close()
    assert time.monotonic() - started < 1.0
    with pytest.raises(VectorStoreUnavailable, match="closed"):
        await counting
    assert await old.count("kb", None) == 1
    await old.close()
