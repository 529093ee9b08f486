"""The chat channel's bounds, and what a client is told when one is reached or a turn fails:
the longest message and reply, the per-user message rate and queue, and error frames that carry a fixed
sentence per errorType, never a host, a port or an exception's text."""
from __future__ import annotations

import asyncio
import json
import re

import pytest
from aiohttp import web

from gateway.errors import ApiError, TooManyRequests
from plugins.chat.contract import CHAT_TURNS
from plugins.chat.frames import TURN_ERRORS
from plugins.sessions.contract import CONVERSATIONS
from tests.chat.conftest import ADMIN, context_of, receive_until, token_for
from tests.support.servers import free_port

# What must never reach a device: an address with its port, or the name of an exception class.
INTERNALS = re.compile(r"\d+\.\d+\.\d+\.\d+|localhost|:\d{2,5}\b|[A-Z][a-z]+(Error|Exception)\b|Cannot connect")


def ws_path(client, identity=ADMIN, **query) -> str:
    params = {"token": token_for(client, identity), **query}
    return "/ws/chat?" + "&".join(f"{key}={value}" for key, value in params.items())


def assert_no_internals(frames: list[dict]) -> None:
    for frame in frames:
        text = json.dumps({key: value for key, value in frame.items() if key not in ("session_id", "turn_id")})
        assert not INTERNALS.search(text), frame


async def stored_reply(client, session_id: str) -> str:
    messages = await context_of(client).contracts.require(CONVERSATIONS).list_messages("admin", session_id)
    return "".join(m["content"] for m in messages if m["role"] == "assistant")


# ---------------------------------------------------------------- the longest message

async def test_a_message_past_the_limit_is_an_error_frame_message_too_long(make_gateway, provider):
    gateway = await make_gateway()
    async with gateway.ws_connect(ws_path(gateway, session_id="long-message")) as ws:
        await ws.send_json({"type": "message", "content": "x" * 100_000, "client_msg_id": "m1"})
        frames = await receive_until(ws, "error")
    assert frames[-1]["errorType"] == "message_too_long" and frames[-1]["client_msg_id"] == "m1"
    assert "32000" in frames[-1]["error"] and provider.requests == []
    # Every other way in (voice, webhooks, the bridge, automation) meets the same bound.
    with pytest.raises(ApiError) as refused:
        await context_of(gateway).contracts.require(CHAT_TURNS).submit_turn("admin", "long-message", "x" * 32_001)
    assert refused.value.status == 413 and refused.value.error_type == "message_too_long"


# ---------------------------------------------------------------- the longest reply

async def test_a_reply_longer_than_the_limit_is_cut_there_stored_and_ended(make_gateway, provider):
    gateway = await make_gateway(settings={"max_reply_chars": 1000})
    provider.reply = "x" * 5000
    async with gateway.ws_connect(ws_path(gateway, session_id="long")) as ws:
        await ws.send_json({"type": "message", "content": "write a lot"})
        frames = await receive_until(ws, "stream_end")
        errors = [frame for frame in frames if frame["type"] == "error"]
        assert [error["errorType"] for error in errors] == ["reply_too_large"]
        assert "1000 characters" in errors[0]["error"]
        end = frames[-1]
        assert end["finish_reason"] == "length" and end["text"] == "x" * 1000
        assert "".join(f["content"] for f in frames if f["type"] == "stream_chunk") == "x" * 1000
        assert await stored_reply(gateway, "long") == "x" * 1000
        provider.reply = "short again"  # the session goes on
        await ws.send_json({"type": "message", "content": "and now?"})
        assert (await receive_until(ws, "stream_end"))[-1]["text"] == "short again"


async def test_a_reply_over_eight_mebibytes_ends_cleanly_with_the_default_limit(gateway, provider):
    """Such a reply's `done` event is longer than any server-sent event line the gateway reads:
    the reply is cut at the limit long before, and the turn ends as any cut reply does."""
    provider.reply = "y" * (9 * 2**20)
    provider.pieces = 16
    async with gateway.ws_connect(ws_path(gateway, session_id="huge"), max_msg_size=0) as ws:
        await ws.send_json({"type": "message", "content": "write everything"})
        frames = await receive_until(ws, "stream_end", timeout=30)
    assert [frame["errorType"] for frame in frames if frame["type"] == "error"] == ["reply_too_large"]
    assert frames[-1]["finish_reason"] == "length" and len(frames[-1]["text"]) == 400_000
    assert await stored_reply(gateway, "huge") == "y" * 400_000


async def test_an_event_longer_than_the_stream_reads_ends_the_turn(make_gateway, aiohttp_server):
    """An AI core (here one speaking its protocol on a loopback port) that sends one event longer
    than 8 MiB: the turn ends with `reply_too_large`, the partial reply is not stored."""
    async def endless_event(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'event: delta\ndata: {"type": "delta", "content": "so far"}\n\n')
        await response.write(b'event: delta\ndata: {"type": "delta", "content": "')
        for _ in range(9):
            await response.write(b"z" * 2**20)
        await response.write(b'"}\n\n')
        return response

    core = web.Application()
    core.router.add_post("/api/v1/chat/stream", endless_event)
    server = await aiohttp_server(core)
    gateway = await make_gateway(overrides={"peers.ai_core_url": str(server.make_url("")).rstrip("/")})
    async with gateway.ws_connect(ws_path(gateway, session_id="endless")) as ws:
        await ws.send_json({"type": "message", "content": "hello"})
        frames = await receive_until(ws, "stream_end", timeout=30)
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert [error["errorType"] for error in errors] == ["reply_too_large"]
    assert errors[0]["error"] == TURN_ERRORS["reply_too_large"]
    assert frames[-1]["finish_reason"] == "error" and frames[-1]["text"] == "so far"
    assert await stored_reply(gateway, "endless") == ""
    assert_no_internals(frames)


# ---------------------------------------------------------------- message rate and queue

async def test_messages_past_the_users_rate_are_refused_on_every_way_in(make_gateway, provider):
    gateway = await make_gateway(settings={"max_messages_per_minute": 3}, overrides={"auth.chat_for_all_users": True})
    turns = context_of(gateway).contracts.require(CHAT_TURNS)
    async with gateway.ws_connect(ws_path(gateway, session_id="rate")) as ws:
        for index in range(3):
            await ws.send_json({"type": "message", "content": f"message {index}", "session_id": f"rate-{index}"})
        await ws.send_json({"type": "message", "content": "one too many", "client_msg_id": "m4"})
        refused = (await receive_until(ws, "error"))[-1]
    assert refused["errorType"] == "rate_limited" and refused["client_msg_id"] == "m4"
    assert refused["hint"] == "At most 3 messages a minute." and "seconds" in refused["error"]
    with pytest.raises(TooManyRequests) as raised:  # voice and webhooks hand turns in here
        await turns.submit_turn("admin", "rate", "from the voice service")
    assert raised.value.error_type == "rate_limited"
    with pytest.raises(TooManyRequests):
        await turns.submit_and_wait("admin", "rate", "from a webhook", timeout=5)
    # Another user has a rate of their own.
    assert (await turns.submit_turn("user_alice", "alice-rate", "hello"))["status"] == "started"


async def test_messages_past_the_users_queue_bound_are_refused_until_a_turn_ends(make_gateway, provider):
    gateway = await make_gateway(settings={"max_queued_turns": 2})
    turns = context_of(gateway).contracts.require(CHAT_TURNS)
    provider.gate.clear()
    async with gateway.ws_connect(ws_path(gateway, session_id="busy")) as ws:
        await ws.send_json({"type": "message", "content": "runs", "client_msg_id": "a"})
        await asyncio.wait_for(provider.received.wait(), 10)
        for client_msg_id in ("b", "c"):
            await ws.send_json({"type": "message", "content": "waits", "client_msg_id": client_msg_id})
        await ws.send_json({"type": "message", "content": "one too many", "client_msg_id": "d"})
        frames = await receive_until(ws, "error")
        assert [frame["client_msg_id"] for frame in frames if frame["type"] == "queued"] == ["b", "c"]
        refused = frames[-1]
        assert refused["errorType"] == "queue_full" and refused["client_msg_id"] == "d" and refused["hint"]
        with pytest.raises(TooManyRequests) as raised:
            await turns.submit_turn("admin", "busy", "from the voice service")
        assert raised.value.error_type == "queue_full"
        # An idle session's message starts at once: only waiting messages count.
        assert (await turns.submit_turn("admin", "idle", "hello"))["status"] == "started"
        provider.gate.set()
        for _ in range(4):  # the running turn, the two that waited, the idle session's
            await receive_until(ws, "stream_end")
        await ws.send_json({"type": "message", "content": "room again", "client_msg_id": "e"})
        assert (await receive_until(ws, "stream_end", session_id="busy"))[-1]["type"] == "stream_end"


# ---------------------------------------------------------------- no internals in frames

async def test_an_unreachable_ai_core_is_reported_without_its_address(make_gateway):
    port = free_port()
    gateway = await make_gateway(overrides={"peers.ai_core_url": f"http://127.0.0.1:{port}"})
    async with gateway.ws_connect(ws_path(gateway, session_id="down")) as ws:
        await ws.send_json({"type": "message", "content": "anyone there?"})
        frames = await receive_until(ws, "stream_end")
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert errors[0]["errorType"] == "ai_core_unreachable"
    assert errors[0]["error"] == TURN_ERRORS["ai_core_unreachable"]
    assert str(port) not in json.dumps(frames)
    assert_no_internals(frames)


async def test_every_model_failing_is_reported_without_the_providers_address(make_gateway, ai_core_url):
    import aiohttp

    closed = free_port()
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer test-service-token"}) as session:
        async with session.post(ai_core_url + "/api/v1/models/providers/scripted",
                                json={"base_url": f"http://127.0.0.1:{closed}/v1", "api_key": "key"}) as response:
            assert response.status == 200
    gateway = await make_gateway()
    async with gateway.ws_connect(ws_path(gateway, session_id="no-model")) as ws:
        await ws.send_json({"type": "message", "content": "anyone there?"})
        frames = await receive_until(ws, "stream_end")
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert errors[0]["errorType"] == "all_models_failed"
    assert errors[0]["error"] == TURN_ERRORS["all_models_failed"]
    assert str(closed) not in json.dumps(frames)
    assert_no_internals(frames)


async def test_attachments_on_the_gateways_own_address_reveal_no_status_or_type(make_gateway, provider,
                                                                                   gateway_port):
    """The AI core fetches the gateway's own URLs (signed downloads) with a trusted fetcher: a
    client naming another of its URLs learns only that it was not an image."""
    gateway = await make_gateway(port=gateway_port)
    own = f"http://127.0.0.1:{gateway_port}"
    async with gateway.ws_connect(ws_path(gateway, session_id="probe")) as ws:
        frames = []
        for path in ("/api/v1/health", "/api/v1/sessions", "/api/v1/no-such-route"):
            await ws.send_json({"type": "message", "content": "look", "attachments": [{"url": own + path}]})
            frames += await receive_until(ws, "stream_end")
    notices = [frame["system_info"]["message"] for frame in frames if frame["type"] == "system_info"]
    assert len(notices) == 3 and len(set(notices)) == 1, notices
    assert not re.search(r"\b(200|401|404)\b|json|text/", notices[0]), notices[0]
