"""The error body for every kind of failure, health, the hub across instances, graceful stop."""
import asyncio
import contextlib
import os
import signal
import subprocess
import sys

import pytest
from aiohttp import WSCloseCode, WSMsgType, web, ClientSession

from gateway.app import create_app
from gateway.serving import new_event_loop
from gateway.config import Config, ConfigError
from gateway.context import get_context
from gateway.plugins import Plugin
from tests.core.sample_plugin import SamplePlugin
from tests.support.servers import free_port

SPEC_KEYS = {"error", "errorType", "hint"}


async def assert_error(response, status, error_type):
    assert response.status == status
    body = await response.json()
    assert body["errorType"] == error_type and body["error"], body
    assert set(body) <= SPEC_KEYS | {"fields"}
    return body


async def test_error_bodies(aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url, "core.max_body_bytes": 1024})
    client = await aiohttp_client(create_app("svc", config, plugins=[SamplePlugin()]))
    await assert_error(await client.get("/api/v1/no-such-thing"), 404, "not_found")
    body = await assert_error(await client.delete("/api/v1/notes"), 405, "method_not_allowed")
    assert "GET" in body["hint"]
    await assert_error(await client.post("/api/v1/notes", data=b"x" * 5000,
                                         headers={"Content-Type": "application/json"}), 413, "payload_too_large")
    await assert_error(await client.post("/api/v1/notes", data=b"{oops",
                                         headers={"Content-Type": "application/json"}), 400, "invalid_json")
    body = await assert_error(await client.post("/api/v1/notes", json={"text": 5}), 400, "validation_error")
    assert "text" in body["error"]
    await assert_error(await client.post("/api/v1/notes", json={"text": "a", "extra": 1}), 400, "validation_error")
    response = await client.get("/api/v1/boom")
    body = await assert_error(response, 500, "internal_error")
    assert "Traceback" not in body["error"] + body["hint"]
    assert response.headers["X-Request-Id"] in body["hint"]


async def test_health_answers_without_a_database(aiohttp_client, make_config):
    client = await aiohttp_client(create_app("gateway-test", make_config(), plugins=[]))
    response = await client.get("/api/v1/health")
    assert await response.json() == {"status": "ok", "service": "gateway-test", "ws_connections": 0,
                                     "version": "0.1.0"}


class SocketPlugin(Plugin):
    """A WebSocket endpoint on the hub, as the chat plugin will have."""
    name = "socket"

    def setup(self, registrar):
        table = web.RouteTableDef()

        @table.get("/ws/test")
        async def socket(request):
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            hub = get_context(request).hub
            connection = await hub.register(ws, request.query["user"], device_name=request.query.get("device", ""))
            try:
                async for frame in ws:
                    if frame.type == WSMsgType.TEXT:
                        await hub.send_to_user(connection.user_id, {"echo": frame.data}, exclude=connection.id)
            finally:
                await hub.unregister(connection)
            return ws

        registrar.routes(table)


async def test_hub_delivers_to_a_users_devices_on_another_instance(aiohttp_client, make_config, redis_url,
                                                                   bus_prefix):
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first = await aiohttp_client(create_app("gw", make_config(shared), plugins=[SocketPlugin()]))
    second = await aiohttp_client(create_app("gw", make_config(shared), plugins=[SocketPlugin()]))
    async with first.ws_connect("/ws/test?user=alice&device=phone") as phone, \
            second.ws_connect("/ws/test?user=alice&device=laptop") as laptop, \
            second.ws_connect("/ws/test?user=bob") as bob:
        assert (await (await second.get("/api/v1/health")).json())["ws_connections"] == 2
        await phone.send_str("hello")
        assert await laptop.receive_json(timeout=3) == {"echo": "hello"}
        # the sender is excluded, and another user hears nothing
        for ws in (phone, bob):
            try:
                message = await ws.receive(timeout=0.3)
            except asyncio.TimeoutError:
                continue
            raise AssertionError(f"unexpected delivery {message}")


@contextlib.asynccontextmanager
async def device_of(user: str, aiohttp_client, make_config):
    """A device of `user` connected to /ws/test, and the hub's connection for it."""
    app = create_app("gw", make_config(), plugins=[SocketPlugin()])
    client = await aiohttp_client(app)
    hub = get_context(app).hub
    async with client.ws_connect(f"/ws/test?user={user}") as ws:
        for _ in range(300):
            if hub.connections(user):
                break
            await asyncio.sleep(0.01)
        yield ws, hub.connections(user)[0]


async def test_a_client_that_never_reads_is_disconnected(aiohttp_client, make_config):
    async with device_of("slow", aiohttp_client, make_config) as (ws, connection):
        # The client reads nothing: once the sockets' buffers are full every write waits, and
        # what is sent meanwhile queues until the queue is full.
        large = "x" * 65536
        for sent in range(5000):
            if not connection.send(large):
                break
            await asyncio.sleep(0)
        else:
            raise AssertionError("5000 frames of 64 KiB were accepted for a client that reads nothing")
        assert sent >= connection.max_pending
        assert not connection.send({"n": "one too many"})
        message = await ws.receive(timeout=3)
        while message.type == WSMsgType.TEXT:
            message = await ws.receive(timeout=3)
        assert message.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.CLOSING)
        assert ws.close_code == WSCloseCode.POLICY_VIOLATION


async def test_stopping_closes_websockets_with_going_away(make_config):
    app = create_app("gw", make_config(), plugins=[SocketPlugin()])
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    async with ClientSession() as session:
        async with session.ws_connect(f"http://127.0.0.1:{port}/ws/test?user=alice") as ws:
            await asyncio.sleep(0.05)
            await runner.cleanup()
            message = await ws.receive(timeout=5)
            assert message.type == WSMsgType.CLOSE and message.data == WSCloseCode.GOING_AWAY


def test_serve_starts_with_no_configuration_and_stops_on_sigterm(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["DATA_DIR"] = str(tmp_path / "data")
    process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--service", "gateway",
                                "--port", str(port)], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        import time
        import urllib.request
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert process.poll() is None, process.stdout.read()
                assert time.monotonic() < deadline, "gateway did not answer its health check"
                time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert "event loop: uvloop" in process.stdout.read()  # core.event_loop's default
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


async def test_presence_is_seen_from_every_instance(aiohttp_client, make_config, redis_url, bus_prefix):
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first_app = create_app("gw", make_config(shared), plugins=[SocketPlugin()])
    second_app = create_app("gw", make_config(shared), plugins=[SocketPlugin()])
    first = await aiohttp_client(first_app)
    await aiohttp_client(second_app)
    other_hub = get_context(second_app).hub
    assert not await other_hub.is_online("alice")
    async with first.ws_connect("/ws/test?user=alice"):
        await asyncio.sleep(0.05)
        assert await other_hub.is_online("alice")
        assert await other_hub.online_users() == {"alice"}
    await asyncio.sleep(0.1)
    assert not await other_hub.is_online("alice")
    assert await other_hub.online_users() == set()


async def test_text_with_half_a_surrogate_pair_is_sent_replaced_and_in_order(aiohttp_client, make_config):
    """JSON may carry an escaped lone surrogate that UTF-8 cannot encode; the frame still goes
    out (with U+003F in its place) and the connection goes on."""
    async with device_of("carol", aiohttp_client, make_config) as (ws, connection):
        for message in ({"n": 1}, {"text": "half a pair: \ud800"}, {"n": 2}):
            assert connection.send(message)
        assert [await ws.receive_json(timeout=3) for _ in range(3)] == [
            {"n": 1}, {"text": "half a pair: ?"}, {"n": 2}]


@pytest.mark.parametrize("choice, module", [("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_the_event_loop_is_the_configured_one(make_config, choice, module):
    loop = new_event_loop(make_config({"core.event_loop": choice}))
    try:
        assert type(loop).__module__.split(".")[0] == module
        assert loop.run_until_complete(asyncio.sleep(0, result="ran")) == "ran"
    finally:
        loop.close()


def test_the_event_loop_is_uvloop_when_the_setting_is_left_out():
    """One default, the one conf/default.toml and the README state."""
    loop = new_event_loop(Config({"core": {}}))
    try:
        assert type(loop).__module__.split(".")[0] == "uvloop"
    finally:
        loop.close()


def test_an_unknown_event_loop_is_a_configuration_error(make_config):
    with pytest.raises(ConfigError, match="core.event_loop"):
        new_event_loop(make_config({"core.event_loop": "trio"}))


async def test_hub_listeners_hear_each_connection_arrive_and_go_and_a_failing_one_harms_nothing(
        aiohttp_client, make_config):
    app = create_app("gw", make_config(), plugins=[SocketPlugin()])
    hub = get_context(app).hub
    heard: list[tuple[str, str]] = []

    async def broken(connection):
        raise RuntimeError("a plugin's bug")

    async def greet(connection):
        heard.append(("connect", connection.user_id))
        connection.send({"missed": "while you were away"})

    async def farewell(connection):
        heard.append(("disconnect", connection.user_id))

    hub.on_connect(broken)
    hub.on_connect(greet)
    hub.on_disconnect(broken)
    hub.on_disconnect(farewell)
    client = await aiohttp_client(app)
    async with client.ws_connect("/ws/test?user=carol") as ws:
        assert await ws.receive_json(timeout=3) == {"missed": "while you were away"}
        await ws.send_str("still here")  # the connection works after a listener failed
    for _ in range(300):
        if ("disconnect", "carol") in heard:
            break
        await asyncio.sleep(0.01)
    assert heard == [("connect", "carol"), ("disconnect", "carol")]
    assert hub.count("carol") == 0
