"""Redis (`REDIS_URL`) killed in the middle of a reply, and started again empty."""
from __future__ import annotations

import time

import pytest

from tests.chat.conftest import ADMIN, receive_until, token_for
from tests.core.test_bus import RestartableRedis
from tests.faults.conftest import (RECOVERED_WITHIN, TOLD_WITHIN, assert_cut_off_cleanly, run_a_turn, stored_messages,
                                   until_reply_ends)

pytestmark = pytest.mark.slow


@pytest.fixture
async def own_redis():
    """A redis-server of this test's own: the one the other tests share is not killed."""
    server = RestartableRedis()
    await server.start()
    yield server
    server.close()


async def test_redis_killed_mid_reply(own_redis, make_gateway, provider, fault_settings, bus_prefix):
    gateway = await make_gateway(overrides={"bus.redis_url": own_redis.url, "bus.prefix": bus_prefix},
                                 settings=fault_settings)
    query = f"/ws/chat?token={token_for(gateway, ADMIN)}&session_id=redis-fault"
    async with gateway.ws_connect(query) as phone, gateway.ws_connect(query) as laptop:
        assert (await run_a_turn(phone, "before"))[-1]["finish_reason"] == "stop"
        await receive_until(laptop, "stream_end")
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "during", "client_msg_id": "during"})
        frames = await receive_until(phone, "stream_chunk")
        frames += await receive_until(phone, "stream_chunk")  # the model holds after two pieces
        echo = (await receive_until(laptop, "response"))[-1]
        assert echo["content"] == "during" and echo["message_id"]

        own_redis.kill()
        killed_at = time.monotonic()
        provider.gate.set()  # the reply goes on; its frames cannot reach the replay buffer
        rest, _ = await until_reply_ends(phone)
        assert time.monotonic() - killed_at < TOLD_WITHIN
        assert_cut_off_cleanly(frames + rest, {"bus_unavailable"})
        # The other device on this instance is told too: local delivery needs no bus.
        assert (await receive_until(laptop, "stream_end", timeout=TOLD_WITHIN))[-1]["finish_reason"] == "error"

        await own_redis.start()  # empty: locks, marks and replay buffers are gone
        back = time.monotonic()
        frames = await run_a_turn(phone, "after", timeout=RECOVERED_WITHIN)
        assert not [frame for frame in frames if frame["type"] == "error"], frames
        assert frames[-1]["finish_reason"] == "stop" and frames[-1]["text"] == provider.reply
        assert time.monotonic() - back < RECOVERED_WITHIN

    assert await stored_messages(gateway, "redis-fault") == [
        ("user", "before"), ("assistant", provider.reply), ("user", "during"),
        ("user", "after"), ("assistant", provider.reply)]
