"""`CHAT_TURNS.submit_and_wait`: a turn handed in by a plugin (the webhooks) takes the session's
lock like a device's message and is answered when its turn ends, on whichever instance ran it."""
from __future__ import annotations

import asyncio

import pytest

from plugins.chat.contract import CHAT_TURNS, TurnFailed
from plugins.sessions.contract import CONVERSATIONS
from tests.chat.conftest import context_of, eventually, receive_until
from tests.chat.test_instances import two_instances, ws_path


async def test_a_waiting_turn_queues_behind_a_running_one_and_gets_its_reply(gateway, provider):
    turns = context_of(gateway).contracts.require(CHAT_TURNS)
    provider.gate.clear()
    async with gateway.ws_connect(ws_path(gateway, session_id="waits")) as phone:
        await phone.send_json({"type": "message", "content": "first"})
        assert (await phone.receive_json(timeout=5))["type"] == "stream_start"
        waiting = asyncio.create_task(turns.submit_and_wait("admin", "waits", "second",
                                                            metadata={"platform": "crm"}, timeout=20))
        await asyncio.sleep(0.3)
        assert not waiting.done() and len(provider.requests) == 1
        provider.gate.set()
        reply = await waiting
        frames = await receive_until(phone, "stream_end")
        frames += await receive_until(phone, "stream_end")  # the phone sees the second turn too
    assert provider.max_active == 1
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["first", "second"]
    assert reply.text == provider.reply and reply.finish_reason == "stop" and reply.model
    assert frames[-1]["stored_message_ids"] == reply.message_ids
    stored = await context_of(gateway).contracts.require(CONVERSATIONS).list_messages("admin", "waits")
    assert [(m["role"], m["content"], m["metadata"]) for m in stored if m["content"] == "second"] == [
        ("user", "second", {"platform": "crm"})]
    assert [m["id"] for m in stored][-len(reply.message_ids):] == reply.message_ids


async def test_the_reply_comes_from_the_instance_that_ran_the_turn(make_gateway, provider, redis_url, bus_prefix):
    first, second = await two_instances(make_gateway, redis_url, bus_prefix)
    provider.gate.clear()
    async with first.ws_connect(ws_path(first, session_id="across")) as phone:
        await phone.send_json({"type": "message", "content": "first"})
        assert (await phone.receive_json(timeout=5))["type"] == "stream_start"
        waiting = asyncio.create_task(context_of(second).contracts.require(CHAT_TURNS).submit_and_wait(
            "admin", "across", "from the other side", timeout=20))
        await asyncio.sleep(0.3)
        provider.gate.set()
        reply = await waiting
    assert reply.text == provider.reply
    assert [request["messages"][-1]["content"] for request in provider.requests] == ["first", "from the other side"]


async def test_failures_and_timeouts_raise(gateway, provider):
    turns = context_of(gateway).contracts.require(CHAT_TURNS)
    provider.gate.clear()
    with pytest.raises(TurnFailed) as raised:
        await turns.submit_and_wait("admin", "slow", "hello?", timeout=0.5)
    assert raised.value.error_type == "timeout"
    provider.gate.set()

    async def stored() -> bool:  # the turn itself went on
        messages = await context_of(gateway).contracts.require(CONVERSATIONS).list_messages("admin", "slow")
        return [m["role"] for m in messages] == ["user", "assistant"]

    await eventually(stored)
