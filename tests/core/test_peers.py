"""The one peer transport (gateway/peers.py) against a real loopback server: where a peer is
found, and the one mapping of failures — unreachable or a refused credential is 502 with the
spec's body, the peer's own error body is passed on with its status — for a JSON call, a
server-sent-event stream and a WebSocket connect, each within its time limit; and an answer
opened unread for a proxy."""
from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.context import get_context
from gateway.errors import error_response
from gateway.peer_location import peer_addresses, service_url
from gateway.peers import PeerClient, PeerFailed, PeerTimeout
from gateway.services import ServiceSpec
from tests.support.servers import free_port

TOKEN = "test-service-token"


def peer_app() -> web.Application:
    """A service that speaks the spec's wire protocol: the credential checked, error bodies."""
    async def guard(request: web.Request) -> None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            raise web.HTTPUnauthorized(text='{"error": "Invalid token.", "errorType": "invalid_token"}',
                                       content_type="application/json")

    async def echo(request: web.Request) -> web.Response:
        await guard(request)
        return web.json_response({"method": request.method, "query": dict(request.query),
                                  "body": await request.json() if request.can_read_body else None})

    async def refuse(request: web.Request) -> web.Response:
        await guard(request)
        return web.json_response({"error": "No such memory.", "errorType": "memory_not_found",
                                  "hint": "List them first."}, status=404)

    async def forbidden(request: web.Request) -> web.Response:
        return web.json_response({"error": "Not for you.", "errorType": "forbidden"}, status=403)

    async def bare(request: web.Request) -> web.Response:
        return web.Response(status=500, text="Internal Server Error")

    async def failing(request: web.Request) -> web.Response:
        status = int(request.match_info["status"])
        return web.json_response({"error": "Broke.", "errorType": "broke"}, status=status)

    async def raw(request: web.Request) -> web.Response:
        await guard(request)
        return web.json_response({"raw_path": request.raw_path})

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("/echo")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    async def events(request: web.Request) -> web.StreamResponse:
        await guard(request)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(3):
            await response.write(b'data: {"n": %d}\n\n' % index)
        if (await request.json()).get("bad"):
            await response.write(b"data: {oops\n\n")
        if (await request.json()).get("stall"):
            await asyncio.sleep(5)
        return response

    async def socket(request: web.Request) -> web.WebSocketResponse:
        await guard(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "ready", "query": dict(request.query)})
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/refuse", refuse)
    app.router.add_get("/forbidden", forbidden)
    app.router.add_get("/bare", bare)
    app.router.add_get("/failing/{status}", failing)
    app.router.add_get("/raw/{rest:.*}", raw)
    app.router.add_get("/slow", slow)
    app.router.add_get("/redirect", redirect)
    app.router.add_post("/events", events)
    app.router.add_get("/socket", socket)
    return app


@pytest.fixture
async def make_peer(aiohttp_client, make_config):
    """A PeerClient of a started service whose `[peers] memory_service_url` is `url`."""
    async def build(url: str, token: str = TOKEN, timeout: PeerTimeout = PeerTimeout(read=2)) -> PeerClient:
        app = create_app("gateway", make_config({"peers.memory_service_url": url, "auth.service_token": token}),
                         plugins=[])
        await aiohttp_client(app)
        return PeerClient(get_context(app), "memory_service", service="memory service", timeout=timeout)
    return build


@pytest.fixture
async def peer_url(aiohttp_server) -> str:
    return str((await aiohttp_server(peer_app())).make_url("")).rstrip("/")


def body_of(failure: PeerFailed) -> dict:
    """What an endpoint that let the failure through answers (the one error middleware's body)."""
    import json
    return json.loads(error_response(failure).body)


async def test_a_json_call_carries_the_credential_and_the_peers_answer(peer_url, make_peer):
    peer = await make_peer(peer_url)
    assert await peer.call("POST", "/echo", params={"q": 1, "none": None}, json_body={"a": "\ud800"}) == {
        "method": "POST", "query": {"q": "1"}, "body": {"a": "\ufffd"}}  # read back as JSON text


async def test_the_peers_error_body_is_passed_on_with_its_status(peer_url, make_peer):
    peer = await make_peer(peer_url)
    with pytest.raises(PeerFailed) as raised:
        await peer.call("GET", "/refuse")
    assert (raised.value.status, raised.value.peer_status) == (404, 404)
    assert body_of(raised.value) == {"error": "No such memory.", "errorType": "memory_not_found",
                                     "hint": "List them first."}


async def test_unreachable_a_refused_credential_and_a_bare_error_are_502(peer_url, make_peer):
    for url, token, path, peer_status in ((f"http://127.0.0.1:{free_port()}", TOKEN, "/echo", None),
                                          (peer_url, "not-the-token", "/echo", 401),
                                          (peer_url, TOKEN, "/forbidden", 403),
                                          (peer_url, TOKEN, "/bare", 500)):
        peer = await make_peer(url, token)
        with pytest.raises(PeerFailed) as raised:
            await peer.call("GET", path)
        body = body_of(raised.value)
        assert (raised.value.status, raised.value.peer_status) == (502, peer_status), path
        assert body["errorType"] == "memory_service_unreachable" and body["error"] and body["hint"]
        assert ("SERVICE_TOKEN" in body["hint"]) == (peer_status in (401, 403))


async def test_a_peers_own_failure_is_passed_on_as_502_unless_it_is_502_or_503(peer_url, make_peer):
    peer = await make_peer(peer_url)
    for status, answered in ((500, 502), (501, 502), (502, 502), (503, 503)):
        with pytest.raises(PeerFailed) as raised:
            await peer.call("GET", f"/failing/{status}")
        assert (raised.value.status, raised.value.peer_status, raised.value.error_type) == (answered, status, "broke")


async def test_a_quoted_path_goes_as_it_is(peer_url, make_peer):
    """An id quoted whole stays one segment, even `..`, which a URL would otherwise resolve away."""
    peer = await make_peer(peer_url)
    assert await peer.call("GET", "/raw/%2E%2E/a%2Fb", quoted=True) == {"raw_path": "/raw/%2E%2E/a%2Fb"}


async def test_an_answer_opened_for_a_proxy_comes_unread_whatever_its_status(peer_url, make_peer):
    """`open`: the answer as it came (a refused credential and a bare 500 included), a redirect
    not followed; only no answer is raised."""
    peer = await make_peer(peer_url)
    for path, status in (("/echo?q=%C3%A9", 200), ("/forbidden", 403), ("/bare", 500), ("/redirect", 302)):
        answer = await peer.open("GET", path, quoted=True)
        try:
            assert answer.status == status, path
            if status == 200:
                assert (await answer.json())["query"] == {"q": "\u00e9"}
        finally:
            answer.release()
    with pytest.raises(PeerFailed) as raised:
        await (await make_peer(f"http://127.0.0.1:{free_port()}")).open("GET", "/echo")
    assert (raised.value.status, raised.value.error_type) == (502, "memory_service_unreachable")


async def test_a_call_past_its_time_limit_is_502(peer_url, make_peer):
    peer = await make_peer(peer_url, timeout=PeerTimeout(read=0.3))
    with pytest.raises(PeerFailed) as raised:
        await peer.call("GET", "/slow")
    assert raised.value.error_type == "memory_service_unreachable" and "Timeout" in raised.value.error


async def test_a_stream_yields_its_events_and_a_silent_one_ends(peer_url, make_peer):
    peer = await make_peer(peer_url)
    assert [event async for event in peer.events("/events", {}, silence=2)] == [{"n": 0}, {"n": 1}, {"n": 2}]
    seen = []
    with pytest.raises(PeerFailed) as raised:
        async for event in peer.events("/events", {"stall": True}, silence=0.3):
            seen.append(event)
    assert seen == [{"n": 0}, {"n": 1}, {"n": 2}] and raised.value.error_type == "memory_service_unreachable"
    with pytest.raises(PeerFailed) as raised:
        [event async for event in peer.events("/events", {"bad": True}, silence=2)]
    assert (raised.value.error, raised.value.error_type) == ("the memory service sent an unreadable event",
                                                             "memory_service_failed")
    refused = await make_peer(peer_url, "not-the-token")
    with pytest.raises(PeerFailed) as raised:
        [event async for event in refused.events("/events", {}, silence=2)]
    assert (raised.value.status, raised.value.peer_status) == (502, 401)


async def test_a_websocket_connects_with_the_credential(peer_url, make_peer):
    peer = await make_peer(peer_url)
    ws = await peer.connect("/socket", params={"language": "en"})
    assert (await ws.receive_json()) == {"type": "ready", "query": {"language": "en"}}
    await ws.close()
    for url, token in ((peer_url, "not-the-token"), (f"http://127.0.0.1:{free_port()}", TOKEN)):
        with pytest.raises(PeerFailed) as raised:
            await (await make_peer(url, token)).connect("/socket")
        assert (raised.value.status, raised.value.error_type) == (502, "memory_service_unreachable")


def test_a_service_is_found_by_its_variable_else_the_table(make_config):
    specs = [ServiceSpec(id="ai-core", name="AI core", port=18081), ServiceSpec(id="frontend", name="Web", port=5173)]
    assert peer_addresses(make_config(), specs)["ai_core"] == "http://127.0.0.1:18081"
    config = make_config(environ={"AI_CORE_URL": "http://10.0.0.2:9000/"})
    assert peer_addresses(config, specs)["ai_core"] == "http://10.0.0.2:9000"
    assert service_url(config, specs[0], host="192.168.1.5") == "http://10.0.0.2:9000"
    assert service_url(make_config(), specs[0], host="192.168.1.5") == "http://192.168.1.5:18081"
    assert peer_addresses(make_config(), specs)["memory_service"] == ""  # in neither
