"""The replay buffer on both bus implementations: what a reconnecting device reads, and what the next
turn learns about a previous one that never ended."""
import pytest

from gateway.memory_bus import InProcessBus
from gateway.redis_bus import RedisBus
from plugins.chat.replay import Replay


@pytest.fixture(params=["in-process", "redis"])
async def replay(request, bus_prefix):
    if request.param == "in-process":
        bus = InProcessBus(bus_prefix)
    else:
        bus = RedisBus(request.getfixturevalue("redis_url"), bus_prefix)
    yield Replay(bus, ttl=60)
    await bus.close()


async def test_a_finished_turn_is_read_and_not_handed_to_the_next(replay):
    assert await replay.begin("s", "t1") is None
    for seq in range(3):
        await replay.append("s", "t1", seq, f"frame {seq}")
    snapshot = await replay.read("s")
    assert (snapshot.turn_id, snapshot.running, snapshot.frames) == ("t1", True, [(0, "frame 0"), (1, "frame 1"),
                                                                                 (2, "frame 2")])
    await replay.finish("s", "t1")
    assert (await replay.read("s")).running is False
    assert await replay.begin("s", "t2") is None
    assert (await replay.read("s")).frames == []


async def test_a_turn_that_never_ended_is_handed_to_the_next(replay):
    await replay.begin("s", "dead")
    await replay.append("s", "dead", 0, "start")
    await replay.append("s", "dead", 1, "chunk")
    unfinished = await replay.begin("s", "next")
    assert (unfinished.turn_id, unfinished.frames) == ("dead", [(0, "start"), (1, "chunk")])
    snapshot = await replay.read("s")
    assert (snapshot.turn_id, snapshot.running, snapshot.frames) == ("next", True, [])
