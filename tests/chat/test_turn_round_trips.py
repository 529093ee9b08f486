"""What one chat turn costs the shared bus: each round trip to Redis is CPU in the instance and
in Redis and a wait in the turn (bench/README.md, "Workers"), so their number is held here, and a
change that adds one has to raise the bound and say why."""
from __future__ import annotations

import asyncio

from gateway.redis_bus import RedisBus
from plugins.chat.keys import RUNNING_TURNS
from tests.chat.conftest import context_of, eventually, receive_until
from tests.chat.test_instances import ws_path

# A steady turn (not a session's first) with a client_msg_id, its device on the instance running
# it and another instance sharing the bus, replying in 4 pieces: the rate count, the lock with
# the session's running and live marks and the message's admission (one step), the history's
# version, the replay's start, 5 frames (stream_start, 4 chunks), the history's version and
# the session's activity twice (the message, the reply), the user's holders for the echo, the
# review and stream_end with their replay entries (3), the replay's end, letting the lock go.
STEADY_TURN_ROUND_TRIPS = 19


async def test_a_steady_turn_makes_a_bounded_number_of_bus_round_trips(make_gateway, provider, redis_url,
                                                                        bus_prefix):
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    settings = {"sweep_interval": 3600, "heartbeat": 3600}  # no housekeeping in the count
    running, other = await make_gateway(overrides=shared, settings=settings), \
        await make_gateway(overrides=shared, settings=settings)
    bus, watcher = context_of(running).bus, RedisBus(redis_url, bus_prefix)
    counts = []
    async with running.ws_connect(ws_path(running, session_id="counted")) as phone:
        for number in range(3):  # the first turn of a session does more (its marks start)
            before = bus.round_trips
            await phone.send_json({"type": "message", "content": f"turn {number}", "client_msg_id": f"m{number}"})
            await receive_until(phone, "stream_end")
            # Counted until the turn's last step, which lets the lock go.
            await eventually(lambda: _turns_ended(watcher))
            await asyncio.sleep(0.2)  # bookkeeping that follows stream_end
            counts.append(bus.round_trips - before)
    await watcher.close()
    assert context_of(other).bus.round_trips == 0  # the other instance only listens
    assert max(counts[1:]) <= STEADY_TURN_ROUND_TRIPS, counts


async def _turns_ended(watcher: RedisBus) -> bool:
    """The running mark is gone: the turn's drain let its lock go in the same step."""
    return not await watcher.members(RUNNING_TURNS)
