"""A person's actions on a conversation over a real /ws/chat: stop a reply while it streams
(from any device of theirs, on any instance), regenerate the last reply, edit a message and
send it again; the AI core's model is the scripted provider, held mid-reply by its gate."""
from __future__ import annotations

import asyncio
import logging

from tests.chat.conftest import ADMIN, ALICE, context_of, receive_until, token_for
from plugins.sessions.contract import CONVERSATIONS


def ws_path(client, identity=ADMIN, **query) -> str:
    params = {"token": token_for(client, identity), **query}
    return "/ws/chat?" + "&".join(f"{key}={value}" for key, value in params.items())


async def stored(client, session_id: str, user_id: str = "admin") -> list[tuple[str, str]]:
    conversations = context_of(client).contracts.require(CONVERSATIONS)
    return [(m["role"], m["content"]) for m in await conversations.all_messages(user_id, session_id)]


async def held_reply(ws, provider, text: str = "go") -> list[dict]:
    """Send `text` and return the frames up to the reply's second chunk; the model then holds."""
    provider.reply, provider.pieces, provider.hold_after = "alpha beta gamma delta", 4, 2
    provider.gate.clear()
    await ws.send_json({"type": "message", "content": text})
    frames = await receive_until(ws, "stream_chunk")
    frames += await receive_until(ws, "stream_chunk")
    return frames


async def test_stop_ends_the_reply_with_what_arrived_and_stores_it(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="stop-1")) as ws:
        frames = await held_reply(ws, provider)
        turn_id = frames[-1]["turn_id"]
        await ws.send_json({"type": "stop", "turn_id": turn_id})
        end = (await receive_until(ws, "stream_end"))[-1]
        assert end["finish_reason"] == "stopped" and end["turn_id"] == turn_id
        partial = "".join(frame["content"] for frame in frames if frame["type"] == "stream_chunk")
        assert end["text"] == partial and partial and partial != provider.reply
        assert end["user_message_id"]
        # The session is free at once: the next message gets its reply.
        provider.gate.set()
        await ws.send_json({"type": "message", "content": "again"})
        assert (await receive_until(ws, "stream_end"))[-1]["text"] == provider.reply
    assert await stored(gateway, "stop-1") == [("user", "go"), ("assistant", partial), ("user", "again"),
                                               ("assistant", provider.reply)]


async def test_a_stop_at_any_point_of_a_reply_ends_it_once_and_stores_what_arrived(gateway, provider, caplog):
    """A stop lands wherever the turn is: before its reply starts, between two pieces, as a
    piece arrives, after the last one. Every time the reply ends exactly once — `stopped` with
    the text the devices were sent, or `stop` with the whole reply when it had finished — the
    session is free for the next message, and the reply is stored once, as it ended. The AI
    core logs no error for the streams closed under it."""
    caplog.set_level(logging.INFO)
    provider.reply, provider.pieces, provider.hold_after = "".join(f"w{number} " for number in range(24)), 24, 99
    provider.piece_delay = 0.004
    loop = asyncio.get_running_loop()
    ends = []
    async with gateway.ws_connect(ws_path(gateway, session_id="stop-many")) as ws:
        for attempt in range(36):
            await ws.send_json({"type": "message", "content": f"go {attempt}"})
            started = await receive_until(ws, "stream_start")
            turn_id = started[-1]["turn_id"]
            if attempt % 12 == 11:  # after the reply's end: nothing happens
                frames = await receive_until(ws, "stream_end")
                await ws.send_json({"type": "stop", "turn_id": turn_id})
            else:  # from at once to about the reply's end
                await asyncio.sleep((attempt % 12) * 0.01)
                await ws.send_json({"type": "stop", "turn_id": turn_id})
                frames = await receive_until(ws, "stream_end")
            # Nothing of this turn follows its end: a ping's answer comes next.
            await ws.send_json({"type": "ping"})
            after = await receive_until(ws, "pong")
            assert [frame["type"] for frame in after] == ["pong"], after
            end = frames[-1]
            assert end["turn_id"] == turn_id
            assert [frame["type"] for frame in frames].count("stream_end") == 1
            sent = "".join(frame["content"] for frame in frames if frame["type"] == "stream_chunk")
            assert end["text"] == sent
            if end["finish_reason"] == "stop":
                assert sent == provider.reply
            else:
                assert end["finish_reason"] == "stopped", end
            ends.append(end)
        started_at = loop.time()
        while len(await stored(gateway, "stop-many")) < 2 * len(ends) and loop.time() - started_at < 10:
            await asyncio.sleep(0.05)
    messages = await stored(gateway, "stop-many")
    expected = []
    for attempt, end in enumerate(ends):
        expected.append(("user", f"go {attempt}"))
        if end["text"].strip():  # an empty reply stops with nothing to store
            expected.append(("assistant", end["text"].strip()))
    assert messages == expected
    assert {end["finish_reason"] for end in ends} == {"stop", "stopped"}  # both kinds of point were reached
    errors = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert not errors, [record.getMessage() for record in errors]
    # That the AI core sees its stream closed and stops the model is tests/ai_core/test_caller_leaves.py's:
    # this AI core runs on aiohttp's test server, which cancels the handler when its caller goes.


async def test_a_stop_from_another_device_of_the_person_ends_it_on_every_device(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="stop-2")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="stop-2")) as laptop:
        await held_reply(phone, provider)
        await receive_until(laptop, "stream_chunk")
        await laptop.send_json({"type": "stop"})  # no turn_id: whichever runs in the session
        phone_end = (await receive_until(phone, "stream_end"))[-1]
        laptop_end = (await receive_until(laptop, "stream_end"))[-1]
    assert phone_end["finish_reason"] == laptop_end["finish_reason"] == "stopped"
    assert phone_end["text"] == laptop_end["text"]


async def test_a_stop_reaches_the_turn_on_another_instance(make_gateway, provider, redis_url, bus_prefix):
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first, second = await make_gateway(overrides=shared), await make_gateway(overrides=shared)
    async with first.ws_connect(ws_path(first, session_id="stop-3")) as phone, \
            second.ws_connect(ws_path(second, session_id="stop-3")) as laptop:
        frames = await held_reply(phone, provider)
        await laptop.send_json({"type": "stop", "turn_id": frames[-1]["turn_id"]})
        phone_end = (await receive_until(phone, "stream_end"))[-1]
        laptop_end = (await receive_until(laptop, "stream_end", session_id="stop-3"))[-1]
    assert phone_end["finish_reason"] == laptop_end["finish_reason"] == "stopped"
    assert (await stored(first, "stop-3"))[-1] == ("assistant", phone_end["text"])


async def test_a_strangers_stop_and_a_late_stop_do_nothing(make_gateway, provider):
    gateway = await make_gateway(overrides={"auth.chat_for_all_users": True})
    async with gateway.ws_connect(ws_path(gateway, session_id="stop-4")) as owner, \
            gateway.ws_connect(ws_path(gateway, ALICE, session_id="stop-4")) as stranger:
        frames = await held_reply(owner, provider)
        turn_id = frames[-1]["turn_id"]
        await stranger.send_json({"type": "stop", "session_id": "stop-4", "turn_id": turn_id})
        await stranger.send_json({"type": "ping"})
        assert (await stranger.receive_json(timeout=5))["type"] == "pong"  # the stop was handled first
        provider.gate.set()
        end = (await receive_until(owner, "stream_end"))[-1]
        assert end["finish_reason"] == "stop" and end["text"] == provider.reply
        await owner.send_json({"type": "stop", "turn_id": turn_id})  # it ended: nothing happens
        await owner.send_json({"type": "ping"})
        assert (await owner.receive_json(timeout=5))["type"] == "pong"
    assert await stored(gateway, "stop-4") == [("user", "go"), ("assistant", provider.reply)]


async def test_regenerate_replaces_the_last_reply_without_storing_the_message_again(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="regen")) as ws, \
            gateway.ws_connect(ws_path(gateway, session_id="regen")) as other:
        await ws.send_json({"type": "message", "content": "first"})
        await receive_until(ws, "stream_end")
        await ws.send_json({"type": "message", "content": "second"})
        first_end = (await receive_until(ws, "stream_end"))[-1]
        await receive_until(other, "stream_end")
        await receive_until(other, "stream_end")
        provider.reply = "A better answer."
        await ws.send_json({"type": "regenerate"})
        frames = await receive_until(ws, "stream_end")
        seen = await receive_until(other, "stream_end")
    changed = frames[0]
    assert changed["type"] == "history_changed" and changed["reason"] == "regenerate"
    assert changed["from_message_id"] == first_end["user_message_id"] + 1
    assert seen[0]["type"] == "history_changed" and "response" not in [frame["type"] for frame in seen]
    assert frames[-1]["text"] == "A better answer." and frames[-1]["user_message_id"] == first_end["user_message_id"]
    assert await stored(gateway, "regen") == [("user", "first"), ("assistant", "Hello there, friend."),
                                              ("user", "second"), ("assistant", "A better answer.")]
    # The model saw the history before the message, and the message once.
    assert [(m["role"], m["content"]) for m in provider.requests[-1]["messages"] if m["role"] != "system"] == [
        ("user", "first"), ("assistant", "Hello there, friend."), ("user", "second")]


async def test_edit_truncates_the_history_and_runs_the_new_text(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="edit")) as ws, \
            gateway.ws_connect(ws_path(gateway, session_id="edit")) as other:
        await ws.send_json({"type": "message", "content": "one"})
        await receive_until(ws, "stream_end")
        await ws.send_json({"type": "message", "content": "two"})
        second = (await receive_until(ws, "stream_end"))[-1]
        await ws.send_json({"type": "message", "content": "three"})
        await receive_until(ws, "stream_end")
        for _ in range(3):
            await receive_until(other, "stream_end")
        await ws.send_json({"type": "edit", "message_id": second["user_message_id"], "content": "two, edited",
                            "client_msg_id": "e1"})
        frames = await receive_until(ws, "stream_end")
        seen = await receive_until(other, "stream_end")
    assert frames[0]["type"] == "history_changed" and frames[0]["from_message_id"] == second["user_message_id"]
    assert frames[0]["reason"] == "edit"
    assert [(f["type"], f.get("content")) for f in seen[:2]] == [("history_changed", None), ("response", "two, edited")]
    assert await stored(gateway, "edit") == [("user", "one"), ("assistant", provider.reply),
                                             ("user", "two, edited"), ("assistant", provider.reply)]
    assert [m["content"] for m in provider.requests[-1]["messages"] if m["role"] == "user"] == ["one", "two, edited"]


async def test_edit_and_regenerate_are_refused_while_a_turn_runs(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="busy")) as ws:
        provider.gate.set()
        await ws.send_json({"type": "message", "content": "one"})
        end = (await receive_until(ws, "stream_end"))[-1]
        await held_reply(ws, provider, "two")
        await ws.send_json({"type": "regenerate"})
        refused = (await receive_until(ws, "error"))[-1]
        assert refused["errorType"] == "turn_running"
        await ws.send_json({"type": "edit", "message_id": end["user_message_id"], "content": "changed"})
        refused = (await receive_until(ws, "error"))[-1]
        assert refused["errorType"] == "turn_running"
        provider.gate.set()
        await receive_until(ws, "stream_end")
        # Someone else's message, or one that is not the person's own, cannot be edited.
        await ws.send_json({"type": "edit", "message_id": end["user_message_id"] + 1, "content": "x"})
        assert (await receive_until(ws, "error"))[-1]["errorType"] == "message_not_found"
    assert await stored(gateway, "busy") == [("user", "one"), ("assistant", "Hello there, friend."),
                                             ("user", "two"), ("assistant", "alpha beta gamma delta")]


async def test_an_edit_drops_the_cached_history_on_every_instance(make_gateway, provider, redis_url, bus_prefix):
    """The other instance's copy of the session's recent history must not keep the deleted messages."""
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first, second = await make_gateway(overrides=shared), await make_gateway(overrides=shared)
    async with second.ws_connect(ws_path(second, session_id="cache")) as ws:
        await ws.send_json({"type": "message", "content": "one"})
        end = (await receive_until(ws, "stream_end"))[-1]
    async with first.ws_connect(ws_path(first, session_id="cache")) as ws:
        await ws.send_json({"type": "edit", "message_id": end["user_message_id"], "content": "uno"})
        await receive_until(ws, "stream_end")
    async with second.ws_connect(ws_path(second, session_id="cache")) as ws:
        await ws.send_json({"type": "message", "content": "two"})
        await receive_until(ws, "stream_end")
    assert [m["content"] for m in provider.requests[-1]["messages"] if m["role"] == "user"] == ["uno", "two"]
