"""Redis (`REDIS_URL`) killed in the middle of a reply, and started again empty."""
from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.chat.conftest import ADMIN, context_of, receive_until, token_for
from tests.core.test_bus import RestartableRedis
from tests.faults.conftest import (RECOVERED_WITHIN, TOLD_WITHIN, assert_cut_off_cleanly, run_a_turn, stored_messages,
                                   until_reply_ends)

pytestmark = [
    pytest.mark.slow,
    # Killing Redis mid-reply, redis-py drops a pooled connection whose reads the kill cut short
    # without closing its StreamWriter (the socket is already dead); Python reports it when the
    # writer is collected. Not a leak of ours; filtered here only (issue 43 keeps looking).
    pytest.mark.filterwarnings("ignore:Exception ignored in. <function StreamWriter.__del__"
                               ":pytest.PytestUnraisableExceptionWarning"),
]


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


async def test_a_shutdown_neither_waits_on_a_hung_redis_nor_leaves_a_task_behind(
        own_redis, make_gateway, fault_settings, bus_prefix):
    """A device that leaves while Redis hangs (stopped, not dead: commands wait for their socket
    timeout) must not hold the gateway's shutdown, nor leave its leaving running after it (CI
    once failed at a test's teardown on such a task, "Timeout reading from ...")."""
    gateway = await make_gateway(overrides={"bus.redis_url": own_redis.url, "bus.prefix": bus_prefix},
                                 settings=fault_settings)
    query = f"/ws/chat?token={token_for(gateway, ADMIN)}&session_id=redis-hung"
    phone = await gateway.ws_connect(query)
    assert (await run_a_turn(phone, "before"))[-1]["finish_reason"] == "stop"
    assert own_redis.process is not None
    own_redis.process.send_signal(signal.SIGSTOP)
    try:
        await phone.close()  # the hub starts leaving the bus for it, and hangs there
        await asyncio.sleep(0.5)
        await asyncio.wait_for(context_of(gateway).hub.close_all(), 30)  # the shutdown's first step
        leaving = [task for task in asyncio.all_tasks()
                   if not task.done() and getattr(task.get_coro(), "__qualname__", "") == "WebSocketHub._leave"]
        assert leaving == []
        await asyncio.wait_for(gateway.close(), 60)  # each command waits for Redis's socket timeout
    finally:
        own_redis.process.send_signal(signal.SIGCONT)
