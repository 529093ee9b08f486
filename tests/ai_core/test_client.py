"""The one client of the AI core (`AI_CORE`, the ai_core_client plugin) against the real AI core
on a loopback port, and against a loopback server that breaks its protocol: the chat stream's
events as the AI core sent them, image descriptions, and one error for every way a call fails."""
from __future__ import annotations

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.context import get_context
from plugins.ai_core import client_plugin
from plugins.ai_core.contract import AI_CORE, AiCoreError
from tests.ai_core.conftest import configure
from tests.ai_core.test_vision import DATA_URI
from tests.support.servers import free_port


@pytest.fixture
def make_client(aiohttp_client, make_config):
    """The AI core client of a gateway whose `peers.ai_core_url` is `url`."""
    async def build(url: str, overrides: dict | None = None):
        config = make_config({"peers.ai_core_url": url, **(overrides or {})})
        app = create_app("gateway", config, plugins=[client_plugin])
        await aiohttp_client(app)  # started: the client session is open
        return get_context(app).contracts.require(AI_CORE)
    return build


@pytest.fixture
async def ai_core_url(aiohttp_server, make_ai_core):
    ai_core = await make_ai_core()
    return str(ai_core.make_url("")).rstrip("/"), ai_core


async def collect(client, body: dict) -> list[dict]:
    return [event async for event in client.stream_chat(body)]


async def test_the_chat_stream_yields_the_ai_cores_events(ai_core_url, make_client, provider):
    url, ai_core = ai_core_url
    await configure(ai_core, provider, {"thinking": "thinker"}, chain=["thinking"])
    client = await make_client(url)
    events = await collect(client, {"user_id": "user_alice", "session_id": "s-1", "text": "hm",
                                    "history": [{"role": "user", "content": "earlier \ud800"}]})
    assert events[0] == {"type": "thinking", "status": "thinking", "content": "Let me think."}
    # The answer's pieces, joined where they arrived together (one read, one delta).
    assert {e["type"] for e in events[1:-1]} == {"delta"} and events[-1]["type"] == "done"
    assert "".join(e["content"] for e in events[1:-1]) == "Thought it through."
    assert events[-1]["text"] == "Thought it through." and events[-1]["model"] == "thinking"
    # The lone surrogate of the history went out escaped, as json writes it.
    assert provider.requests[-1]["body"]["messages"][1]["content"] == "earlier \ufffd"


async def test_errors_of_the_chat_stream(ai_core_url, make_client):
    url, _ = ai_core_url
    unreachable = await make_client(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(AiCoreError) as raised:
        await collect(unreachable, {"user_id": "user_alice", "text": "hi"})
    assert raised.value.error_type == "ai_core_unreachable" and raised.value.status == 502
    assert raised.value.error.startswith("the AI core cannot be reached or stopped answering (")

    client = await make_client(url)
    with pytest.raises(AiCoreError) as raised:  # the AI core's own answer, passed on
        await collect(client, {"text": "hi"})
    assert (raised.value.error_type, raised.value.status) == ("validation_error", 400)
    assert raised.value.error == "A service must name the user it acts for."


async def test_a_bad_event_or_stream_is_one_error(aiohttp_server, make_client):
    answers = {"bad": b"event: delta\ndata: {oops\n\n",
               "long": b"data: " + b"x" * (9 * 2**20),
               "plain": None}

    async def stream(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if answers[body["text"]] is None:
            return web.Response(status=503, text="down for maintenance")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"type": "delta", "content": "Hi"}\n\n' + answers[body["text"]])
        return response

    app = web.Application()
    app.router.add_post("/api/v1/chat/stream", stream)
    server = await aiohttp_server(app)
    client = await make_client(f"http://127.0.0.1:{server.port}")
    seen = []
    with pytest.raises(AiCoreError) as raised:
        async for event in client.stream_chat({"user_id": "u", "text": "bad"}):
            seen.append(event)
    assert seen == [{"type": "delta", "content": "Hi"}]
    assert (raised.value.error, raised.value.error_type) == ("the AI core sent an unreadable event", "ai_core_failed")
    with pytest.raises(AiCoreError) as raised:
        await collect(client, {"user_id": "u", "text": "long"})
    assert (raised.value.error, raised.value.error_type) == (
        "the AI core sent an event longer than 8388608 bytes", "reply_too_large")
    with pytest.raises(AiCoreError) as raised:
        await collect(client, {"user_id": "u", "text": "plain"})
    # An error without the spec's body is no usable answer (the transport's one rule): 502.
    assert (raised.value.error, raised.value.error_type, raised.value.status, raised.value.peer_status) == (
        "The AI core answered 503 without an error body: down for maintenance.", "ai_core_unreachable", 502, 503)


async def test_a_silent_chat_stream_times_out_and_a_slow_one_does_not(aiohttp_server, make_client):
    """`chat_read_timeout` is the longest the stream may stay silent, before its answer starts
    or between two events; a stream whose events keep coming may last longer than that."""
    import asyncio
    import time

    async def stream(request: web.Request) -> web.StreamResponse:
        text = (await request.json())["text"]
        if text == "late":  # nothing, not even the answer's start
            await asyncio.sleep(10)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(6 if text == "slow" else 1):
            await asyncio.sleep(0.15)
            await response.write(b'data: {"type": "delta", "content": "%d"}\n\n' % index)
        if text == "stalls":
            await asyncio.sleep(10)
        await response.write(b'data: {"type": "done", "text": "ok"}\n\n')
        return response

    app = web.Application()
    app.router.add_post("/api/v1/chat/stream", stream)
    server = await aiohttp_server(app)
    client = await make_client(f"http://127.0.0.1:{server.port}",
                               {"plugins.ai_core_client": {"chat_read_timeout": 1.0}})
    slow = await collect(client, {"user_id": "u", "text": "slow"})  # 0.9 s in all, never 1 s silent
    assert [event.get("content") for event in slow] == ["0", "1", "2", "3", "4", "5", None]
    for text, events_before in (("late", []), ("stalls", [{"type": "delta", "content": "0"}])):
        seen = []
        started = time.monotonic()
        with pytest.raises(AiCoreError) as raised:
            async for event in client.stream_chat({"user_id": "u", "text": text}):
                seen.append(event)
        assert seen == events_before and 1.0 <= time.monotonic() - started < 5
        assert raised.value.error_type == "ai_core_unreachable" and "TimeoutError" in raised.value.error


async def test_image_descriptions_and_a_refused_credential(ai_core_url, make_client, provider):
    url, ai_core = ai_core_url
    client = await make_client(url)
    with pytest.raises(AiCoreError) as raised:
        await client.describe_image(DATA_URI, prompt="What is it?", user_id="user_alice")
    assert (raised.value.error_type, raised.value.status) == ("no_vision_model", 404)
    await configure(ai_core, provider, {"eye": "vision"}, tags=["vision"])
    described = await client.describe_image(DATA_URI, prompt="What is it?", user_id="user_alice")
    assert described == {"description": "A green meadow under a pale blue sky.", "model": "eye"}
    assert provider.images_seen == [(1, 1)]

    # A service credential the AI core refuses is this side's fault: 502, not the caller's 401.
    refused = await make_client(url, {"auth.service_token": "not-the-token"})
    with pytest.raises(AiCoreError) as raised:
        await refused.models()
    assert (raised.value.error_type, raised.value.status, raised.value.peer_status) == ("ai_core_unreachable", 502, 401)
    assert "SERVICE_TOKEN" in raised.value.hint
