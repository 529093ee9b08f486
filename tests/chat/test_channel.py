"""The chat channel on one instance: handshake rules, frames, a whole turn relayed from the real
AI core, queueing, de-duplication, failures, resumable replies and presence."""
from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from gateway.serving import AccessLogger
from gateway.text import without_lone_surrogates

from tests.chat.conftest import ADMIN, ALICE, BOB, context_of, eventually, receive_until, token_for
from tests.support.servers import free_port
from plugins.chat.contract import CHAT_TURNS, PRESENCE
from plugins.sessions.contract import CONVERSATIONS


def ws_path(client, identity=ADMIN, **query) -> str:
    params = {"token": token_for(client, identity), **query}
    return "/ws/chat?" + "&".join(f"{key}={value}" for key, value in params.items())


async def test_handshake_requires_a_valid_token_and_the_administrator(gateway):
    response = await gateway.get("/ws/chat", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
    assert response.status == 401
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect("/ws/chat?token=not-a-jwt")
    assert refused.value.status == 401
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect(ws_path(gateway, ALICE))
    assert refused.value.status == 403
    # The bearer header works as well as the query parameter.
    headers = {"Authorization": f"Bearer {token_for(gateway, ADMIN)}"}
    async with gateway.ws_connect("/ws/chat?session_id=s-header", headers=headers) as ws:
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"


async def test_users_reach_only_their_own_sessions_when_enabled(make_gateway, provider):
    """Session ids are per owner: Alice naming Bob's session id gets a session of her own, and
    neither sees the other's frames, history or replay."""
    gateway = await make_gateway(overrides={"auth.chat_for_all_users": True})
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    async with gateway.ws_connect(ws_path(gateway, BOB, session_id="shared-name")) as bob:
        await bob.send_json({"type": "message", "content": "bob's words"})
        await receive_until(bob, "stream_end")
        provider.gate.clear()  # Bob's next reply stays unfinished while Alice connects
        await bob.send_json({"type": "message", "content": "bob again"})
        await receive_until(bob, "stream_chunk")
        async with gateway.ws_connect(ws_path(gateway, ALICE, session_id="shared-name")) as alice:
            await alice.send_json({"type": "history"})
            history = await receive_until(alice, "history_response")
            assert [frame["type"] for frame in history] == ["history_response"]  # nothing of Bob's replayed
            assert history[-1]["messages"] == []
            await alice.send_json({"type": "message", "content": "alice's words"})
            frames = await receive_until(alice, "stream_chunk")  # started: not queued behind Bob's turn
            assert "queued" not in [frame["type"] for frame in frames]
            provider.gate.set()
            await receive_until(alice, "stream_end")
        bobs_frames = await receive_until(bob, "stream_end")
    assert "alice's words" not in json.dumps(bobs_frames)
    assert [m["content"] for m in await conversations.all_messages("user_alice", "shared-name")][0] == "alice's words"
    assert [m["content"] for m in await conversations.all_messages("user_bob", "shared-name") if m["role"] == "user"] \
        == ["bob's words", "bob again"]


async def test_the_core_setting_opens_the_channel_to_every_user(make_gateway):
    """`[auth] chat_for_all_users`: the one rule the AI core's doors read too (tests/ai_core)."""
    gateway = await make_gateway(overrides={"auth.chat_for_all_users": True})
    async with gateway.ws_connect(ws_path(gateway, ALICE, session_id="alice-1")) as ws:
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"
    closed = await make_gateway(overrides={"auth.chat_for_all_users": False})
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await closed.ws_connect(ws_path(closed, ALICE, session_id="alice-2"))
    assert refused.value.status == 403


async def test_origin_is_checked_against_the_allow_list(make_gateway):
    gateway = await make_gateway(settings={"allowed_origins": ["https://app.example"]})
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect(ws_path(gateway), headers={"Origin": "https://evil.example"})
    assert refused.value.status == 403
    async with gateway.ws_connect(ws_path(gateway), headers={"Origin": "https://app.example"}) as ws:
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"


async def test_the_token_never_reaches_a_log(make_gateway, caplog):
    """With the access logger `gateway serve` runs with (the query string is left out)."""
    gateway = await make_gateway(access_log_class=AccessLogger)
    caplog.set_level(logging.DEBUG)
    token = token_for(gateway, ADMIN)
    async with gateway.ws_connect(f"/ws/chat?token={token}") as ws:
        await ws.send_json({"type": "ping"})
        await ws.receive_json(timeout=5)
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await gateway.ws_connect("/ws/chat?token=secret-but-wrong-token")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/ws/chat" in logged
    assert token not in logged and "secret-but-wrong-token" not in logged


async def test_malformed_frames_get_an_error_and_the_connection_stays(gateway):
    async with gateway.ws_connect(ws_path(gateway)) as ws:
        await ws.send_str("{not json")
        assert "not valid JSON" in (await ws.receive_json(timeout=5))["error"]
        await ws.send_json({"type": "message", "mode": "shouting"})
        assert "mode" in (await ws.receive_json(timeout=5))["error"]
        await ws.send_json({"type": "message", "content": "   "})
        assert "content or an attachment" in (await ws.receive_json(timeout=5))["error"]
        await ws.send_json({"type": "history", "limit": 0})
        assert "limit" in (await ws.receive_json(timeout=5))["error"]
        await ws.send_bytes(b"\x00\x01")
        assert "binary" in (await ws.receive_json(timeout=5))["error"]
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"


async def test_frames_above_the_limit_close_the_connection(make_gateway):
    gateway = await make_gateway(settings={"max_frame_bytes": 1024})
    async with gateway.ws_connect(ws_path(gateway)) as ws:
        await ws.send_str('{"type": "ping", "pad": "' + "x" * 2048 + '"}')
        message = await ws.receive(timeout=5)
        assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG


@pytest.mark.parametrize("compress", [True, False])
async def test_compression_is_accepted_as_configured(make_gateway, provider, compress):
    """A browser always offers permessage-deflate; the operator decides whether it is taken."""
    gateway = await make_gateway(settings={"compress": compress})
    async with gateway.ws_connect(ws_path(gateway), compress=15) as ws:
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"
        assert ws.compress == (15 if compress else 0)
        await ws.send_json({"type": "message", "content": "hello"})
        frames = await receive_until(ws, "stream_end")
    assert frames[-1]["text"] == provider.reply


async def test_a_turn_is_relayed_to_every_device_and_stored(gateway, provider):
    provider.reply = "Sure. <action>waves</action> Here:\n\n```python\nprint(1)\n```"
    async with gateway.ws_connect(ws_path(gateway, session_id="s1", client_id="phone")) as phone, \
            gateway.ws_connect(ws_path(gateway, session_id="s1", client_id="laptop")) as laptop:
        await phone.send_json({"type": "message", "content": "hi there", "client_msg_id": "m1"})
        sender_frames = await receive_until(phone, "stream_end")
        other_frames = await receive_until(laptop, "stream_end")

    kinds = [frame["type"] for frame in sender_frames]
    assert kinds[0] == "stream_start" and kinds[-2:] == ["review", "stream_end"]
    assert "response" not in kinds  # the echo goes to the other devices only
    chunks = [frame["content"] for frame in sender_frames if frame["type"] == "stream_chunk"]
    assert "".join(chunks) == provider.reply
    assert all(frame.get("msg_type") for frame in sender_frames + other_frames)
    assert [frame["seq"] for frame in sender_frames] == list(range(len(sender_frames)))
    review = sender_frames[-2]["review_messages"]
    assert [part["type"] for part in review] == ["chat", "action", "chat", "code"]
    assert review[3]["metadata"] == {"language": "python"}
    assert sender_frames[-1]["text"] == provider.reply

    echo = other_frames[0]
    assert echo["type"] == "response" and echo["role"] == "user" and echo["content"] == "hi there"
    assert [frame["type"] for frame in other_frames[1:]] == kinds

    # The AI core received the text and the session's history.
    assert provider.requests[-1]["messages"][-1]["content"] == "hi there"

    async with gateway.ws_connect(ws_path(gateway, session_id="s1")) as ws:
        await ws.send_json({"type": "history", "limit": 3})
        page = await ws.receive_json(timeout=5)
        assert page["type"] == "history_response" and page["msg_type"] == "chat"
        assert [(m["role"], m["msg_type"]) for m in page["messages"]] == [
            ("user", "chat"), ("assistant", "chat"), ("action", "action")]
        assert page["has_more"] is True
        await ws.send_json({"type": "history", "limit": 3, "before_id": page["messages"][0]["id"] + 10})
        latest = await ws.receive_json(timeout=5)
        assert [m["msg_type"] for m in latest["messages"]] == ["action", "chat", "code"]
        assert latest["has_more"] is True


async def test_session_id_is_generated_when_omitted(gateway):
    async with gateway.ws_connect(ws_path(gateway)) as ws:
        await ws.send_json({"type": "history"})
        page = await ws.receive_json(timeout=5)
    assert page["session_id"].startswith("session_") and len(page["session_id"]) == len("session_") + 12
    assert page["messages"] == []


async def test_a_session_the_channel_creates_is_titled_in_the_browsers_language(gateway):
    """A session opened by connecting (with or without an id) gets its default title in the
    upgrade's Accept-Language, as POST /sessions does (docs/sessions.md)."""
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    english = {"Accept-Language": "en-US,en;q=0.9"}
    async with gateway.ws_connect(ws_path(gateway), headers=english) as ws:
        await ws.send_json({"type": "history"})
        generated = (await ws.receive_json(timeout=5))["session_id"]
    async with gateway.ws_connect(ws_path(gateway, session_id="named-en"), headers=english):
        pass
    async with gateway.ws_connect(ws_path(gateway, session_id="named-zh"), headers={"Accept-Language": "zh-CN"}):
        pass
    assert (await conversations.get_session("admin", generated))["title"] == "New chat"
    assert (await conversations.get_session("admin", "named-en"))["title"] == "New chat"
    assert (await conversations.get_session("admin", "named-zh"))["title"] == "新对话"


async def test_messages_queue_while_a_turn_runs_and_never_overlap(gateway, provider):
    provider.gate.clear()
    async with gateway.ws_connect(ws_path(gateway, session_id="busy")) as ws:
        await ws.send_json({"type": "message", "content": "first", "client_msg_id": "a"})
        assert (await ws.receive_json(timeout=5))["type"] == "stream_start"
        await ws.send_json({"type": "message", "content": "second", "client_msg_id": "b"})
        frames = await receive_until(ws, "queued")
        assert frames[-1]["client_msg_id"] == "b" and frames[-1]["position"] == 1
        # Another session is not held up by this one.
        async with gateway.ws_connect(ws_path(gateway, session_id="free")) as other:
            await other.send_json({"type": "message", "content": "elsewhere"})
            await eventually(lambda: _true(provider.active == 2))
        provider.gate.set()
        frames = await receive_until(ws, "stream_end", session_id="busy")
        frames += await receive_until(ws, "stream_end", session_id="busy")
    starts_and_ends = [frame["type"] for frame in frames if frame["type"] in ("stream_start", "stream_end")]
    assert starts_and_ends[-3:] == ["stream_end", "stream_start", "stream_end"]
    texts = [request["messages"][-1]["content"] for request in provider.requests]
    assert texts.index("first") < texts.index("second")


async def _true(value):
    return value


async def test_a_message_resent_with_the_same_client_msg_id_runs_once(gateway, provider):
    async with gateway.ws_connect(ws_path(gateway, session_id="dedup")) as ws:
        await ws.send_json({"type": "message", "content": "once", "client_msg_id": "same"})
        await receive_until(ws, "stream_end")
    async with gateway.ws_connect(ws_path(gateway, session_id="dedup")) as ws:
        await ws.send_json({"type": "message", "content": "once", "client_msg_id": "same"})
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"
        await ws.send_json({"type": "history"})
        page = await ws.receive_json(timeout=5)
    assert [m["content"] for m in page["messages"] if m["role"] == "user"] == ["once"]
    assert len(provider.requests) == 1


async def test_an_unreachable_ai_core_ends_the_turn_and_the_queue_moves_on(make_gateway):
    gateway = await make_gateway(overrides={"peers.ai_core_url": f"http://127.0.0.1:{free_port()}"})
    async with gateway.ws_connect(ws_path(gateway, session_id="down")) as ws, \
            gateway.ws_connect(ws_path(gateway, session_id="down")) as watcher:
        await ws.send_json({"type": "message", "content": "one"})
        await ws.send_json({"type": "message", "content": "two"})
        frames = await receive_until(ws, "stream_end")
        frames += await receive_until(ws, "stream_end")
        watched = await receive_until(watcher, "stream_end")
    errors = [frame for frame in frames if frame["type"] == "error"]
    notices = [frame for frame in frames if frame["type"] == "system_info"]
    assert len(errors) == 2 and errors[0]["errorType"] == "ai_core_unreachable"
    assert len(notices) == 2 and notices[0]["system_info"]["level"] == "error"
    assert all(frame["finish_reason"] == "error" for frame in frames if frame["type"] == "stream_end")
    # The other device sees the stream end, but not the sender's error.
    assert "error" not in [frame["type"] for frame in watched]


async def test_a_reply_resumes_after_a_reconnect_and_finishes_without_devices(gateway, provider):
    provider.reply = "one two three four five six"
    provider.pieces, provider.hold_after = 6, 2
    provider.gate.clear()
    async with gateway.ws_connect(ws_path(gateway, session_id="resume")) as ws:
        await ws.send_json({"type": "message", "content": "tell me"})
        frames = [await ws.receive_json(timeout=5) for _ in range(3)]  # start + two chunks
    assert [frame["type"] for frame in frames] == ["stream_start", "stream_chunk", "stream_chunk"]
    last = frames[-1]
    # A fresh device gets the whole reply so far; the old one only what it missed.
    async with gateway.ws_connect(ws_path(gateway, session_id="resume")) as fresh, \
            gateway.ws_connect(ws_path(gateway, session_id="resume", after=f"{last['turn_id']}:{last['seq']}")) as back:
        await fresh.send_json({"type": "ping"})
        replayed = await receive_until(fresh, "pong")
        assert [frame["type"] for frame in replayed] == ["stream_start", "stream_chunk", "stream_chunk", "pong"]
        provider.gate.set()
        rest = await receive_until(back, "stream_end")
        everything = replayed[:-1] + await receive_until(fresh, "stream_end")
    assert [frame["seq"] for frame in rest] == list(range(last["seq"] + 1, rest[-1]["seq"] + 1))
    assert [frame["seq"] for frame in everything] == list(range(len(everything)))
    assert "".join(f["content"] for f in frames[1:] + rest if f["type"] == "stream_chunk") == provider.reply

    # A turn whose devices all left still runs to the end and is stored.
    provider.gate.clear()
    async with gateway.ws_connect(ws_path(gateway, session_id="resume")) as ws:
        await ws.send_json({"type": "message", "content": "again"})
        await ws.receive_json(timeout=5)
    provider.gate.set()
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)

    async def stored():
        messages = await conversations.list_messages("admin", "resume")
        return len(messages) == 4 and messages
    messages = await eventually(stored)
    assert messages[-1]["content"] == provider.reply


async def test_presence_lists_devices_clients_and_turns(gateway, provider):
    presence = context_of(gateway).contracts.require(PRESENCE)
    provider.gate.clear()
    async with gateway.ws_connect(ws_path(gateway, session_id="live", client_id="tablet-1", device_name="Tablet"),
                                  headers={"User-Agent": "TabletApp/1.0"}) as ws:
        await ws.send_json({"type": "message", "content": "hello"})
        await ws.receive_json(timeout=5)
        state = await presence.session_state("live")
        assert state["device_count"] == 1 and state["turn_running"] is True
        assert state["devices"][0]["device_name"] == "Tablet" and state["user_id"] == "admin"
        assert [s["session_id"] for s in await presence.live_sessions()] == ["live"]
        clients = await presence.known_clients("admin")
        assert clients[0]["client_id"] == "tablet-1" and clients[0]["online"] is True
        assert clients[0]["user_agent"] == "TabletApp/1.0"
        provider.gate.set()
        await receive_until(ws, "stream_end")
    await eventually(lambda: _not_online(presence))
    noted = await presence.set_client_note("tablet-1", "kitchen")
    assert noted["note"] == "kitchen" and noted["online"] is False
    assert await presence.set_client_note("nobody", "x") is None
    # stream_end reaches the client a moment before the turn's bookkeeping releases the session
    await eventually(lambda: _idle(presence, "live"))


async def _idle(presence, session_id):
    return await presence.session_state(session_id) is None


async def _not_online(presence):
    clients = await presence.known_clients()
    return clients and not clients[0]["online"]


async def test_submit_turn_service_queues_like_a_message(gateway, provider):
    submit = context_of(gateway).contracts.require(CHAT_TURNS).submit_turn
    async with gateway.ws_connect(ws_path(gateway, session_id="voice")) as ws:
        result = await submit("admin", "voice", "recognised words", mode="voice_msg")
        assert result["status"] == "started"
        frames = await receive_until(ws, "stream_end")
    assert frames[0]["type"] == "response" and frames[0]["content"] == "recognised words"
    assert provider.requests[-1]["messages"][-1]["content"] == "recognised words"


async def test_half_a_surrogate_pair_from_the_model_is_relayed_and_stored_replaced(gateway, provider):
    """A model's JSON may escape a lone surrogate, which UTF-8 cannot carry: the reply still
    streams, ends and is stored, with the character replaced."""
    provider.reply = "half a pair \ud800 here"
    async with gateway.ws_connect(ws_path(gateway, session_id="surrogate")) as ws:
        await ws.send_json({"type": "message", "content": "hi"})
        frames = await receive_until(ws, "stream_end")
    assert frames[-1]["finish_reason"] == "stop" and frames[-1]["text"] == "half a pair ? here"
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    assert [m["content"] for m in await conversations.all_messages("admin", "surrogate")] == ["hi", "half a pair ? here"]


async def test_half_a_surrogate_pair_from_a_client_is_answered_and_stored_replaced(gateway, provider):
    """A client that cuts an emoji in two sends half of it escaped in JSON, which UTF-8 (the
    database, the frames) cannot carry: the message is answered and stored with U+FFFD."""
    async with gateway.ws_connect(ws_path(gateway, session_id="half")) as ws:
        await ws.send_str('{"type": "message", "content": "half \\ud83d an emoji", "client_msg_id": "h1"}')
        frames = await receive_until(ws, "stream_end")
    assert frames[-1]["finish_reason"] == "stop"
    assert provider.requests[-1]["messages"][-1]["content"] == "half \ufffd an emoji"
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    assert [m["content"] for m in await conversations.all_messages("admin", "half")][0] == "half \ufffd an emoji"


def test_lone_surrogates_from_another_ai_core_become_replacement_characters():
    event = json.loads('{"content": "a\\ud800b \\ud83d\\ude00", "more": ["\\udfff"]}')
    assert without_lone_surrogates(event) == {"content": "a\ufffdb \U0001F600", "more": ["\ufffd"]}
