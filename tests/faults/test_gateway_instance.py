"""One of two gateway instances killed in the middle of a reply (tests/chat/test_failover.py's
instances: A in a child process, B in this one, sharing PostgreSQL and Redis)."""
from __future__ import annotations

import time

import aiohttp
import pytest

from tests.chat.conftest import ADMIN, context_of, receive_until, token_for
from tests.chat.test_failover import FAST_FAILOVER, chat_query
from tests.faults.conftest import (RECOVERED_WITHIN, TOLD_WITHIN, run_a_turn, stored_messages,
                                   until_reply_ends)

pytestmark = pytest.mark.slow


async def test_gateway_instance_killed_mid_reply(two_instances, provider):
    """The phone on A loses its connection at once (that is how it is told) and reconnects to
    B; the laptop on B gets the reply's end once A's turn lock expires (FAST_FAILOVER: 1.5 s;
    the default is 30 s, see docs/operations.md)."""
    survivor, doomed = await two_instances()
    token = token_for(survivor, ADMIN)
    async with aiohttp.ClientSession() as http, \
            http.ws_connect(doomed.base_url + chat_query(token, "instance-fault")) as phone, \
            survivor.ws_connect(chat_query(token, "instance-fault")) as laptop:
        assert (await run_a_turn(phone, "before"))[-1]["finish_reason"] == "stop"
        await receive_until(laptop, "stream_end")
        provider.gate.clear()
        await phone.send_json({"type": "message", "content": "during", "client_msg_id": "during"})
        await receive_until(phone, "stream_chunk")
        echo = await receive_until(laptop, "response")
        assert echo[-1]["content"] == "during" and echo[-1]["message_id"]
        frames = await receive_until(laptop, "stream_chunk")
        frames += await receive_until(laptop, "stream_chunk")  # the model holds after two pieces

        killed_at = time.monotonic()
        await doomed.kill()
        while (await phone.receive(timeout=TOLD_WITHIN)).type == aiohttp.WSMsgType.TEXT:
            pass  # what A had sent before it died; then the connection ends
        assert time.monotonic() - killed_at < TOLD_WITHIN
        provider.gate.set()
        rest, _ = await until_reply_ends(laptop, timeout=TOLD_WITHIN + FAST_FAILOVER["lock_ttl"])
        assert time.monotonic() - killed_at < TOLD_WITHIN + FAST_FAILOVER["lock_ttl"]
        end = rest[-1]
        assert end["finish_reason"] == "error"
        assert end["text"] == "".join(frame["content"] for frame in frames + rest if frame["type"] == "stream_chunk")

    back = time.monotonic()  # the phone comes back, to B
    async with survivor.ws_connect(chat_query(token, "instance-fault")) as phone:
        frames = await run_a_turn(phone, "after", timeout=RECOVERED_WITHIN)
    assert frames[-1]["finish_reason"] == "stop" and frames[-1]["text"] == provider.reply, frames
    assert not [frame for frame in frames if frame["type"] == "error"]
    assert time.monotonic() - back < RECOVERED_WITHIN
    assert await stored_messages(survivor, "instance-fault") == [
        ("user", "before"), ("assistant", provider.reply), ("user", "during"),
        ("user", "after"), ("assistant", provider.reply)]
    assert context_of(survivor).hub.count() == 0
