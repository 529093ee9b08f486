import asyncio

import pytest
from aiohttp import WSMsgType, web
from click.testing import CliRunner

from gateway.app import create_app
from gateway.cli import main as gateway_cli
from gateway.context import get_context
from gateway.contracts import ContractKey
from gateway.plugins import Plugin, PluginError, installed_plugins, select_plugins
from gateway.services import ServiceSpec
from gateway.identity import Identity
from gateway.ws import dispatch_frame, require_admin
from tests.core.sample_plugin import ECHO, SamplePlugin


class Recorder(Plugin):
    """A plugin that records the order its setup ran in."""

    def __init__(self, name, depends=(), log=None, table=None):
        self.name, self.depends, self.log, self.table = name, tuple(depends), log, table

    def setup(self, registrar):
        if self.log is not None:
            self.log.append(self.name)
        if self.table is not None:
            registrar.routes(self.table)


async def test_third_party_plugin_is_found_through_its_installed_entry_point(aiohttp_client, make_config):
    found = installed_plugins(["weather_example"])
    assert found["weather_example"].version == "0.3.1"  # read from the distribution's metadata
    spec = ServiceSpec(id="weather", name="weather", port=0, plugins=("weather_example",))
    client = await aiohttp_client(create_app("weather", make_config(), spec=spec))
    response = await client.get("/api/v1/weather-example")
    assert response.status == 200 and (await response.json())["source"] == "weather_example"


def test_setup_runs_once_in_dependency_order(make_config):
    log = []
    plugins = [Recorder("c", ["b"], log), Recorder("a", [], log), Recorder("b", ["a"], log)]
    create_app("svc", make_config(), plugins=plugins)
    assert log == ["a", "b", "c"]


def test_missing_dependency_stops_start_up(make_config):
    with pytest.raises(PluginError, match="'chat' depends on 'auth'.*not loaded"):
        create_app("svc", make_config(), plugins=[Recorder("chat", ["auth"])])


def test_dependency_cycle_stops_start_up(make_config):
    with pytest.raises(PluginError, match="cycle: (a -> b -> a|b -> a -> b)"):
        create_app("svc", make_config(), plugins=[Recorder("a", ["b"]), Recorder("b", ["a"])])


def test_duplicate_route_stops_start_up(make_config):
    first, second = web.RouteTableDef(), web.RouteTableDef()
    first.get("/api/v1/same")(lambda request: None)
    second.get("/api/v1/same")(lambda request: None)
    with pytest.raises(PluginError, match="GET /api/v1/same is registered by both 'one' and 'two'"):
        create_app("svc", make_config(), plugins=[Recorder("one", table=first), Recorder("two", table=second)])


def test_a_plugin_cannot_take_the_core_health_route(make_config):
    table = web.RouteTableDef()
    table.get("/api/v1/health")(lambda request: None)
    with pytest.raises(PluginError, match="health is registered by both 'core' and 'rogue'"):
        create_app("svc", make_config(), plugins=[Recorder("rogue", table=table)])


def test_duplicate_websocket_type_stops_start_up(make_config):
    class Pinger(Plugin):
        def __init__(self, name):
            self.name = name

        def setup(self, registrar):
            registrar.ws_message("ping")(lambda connection, message: None)

    with pytest.raises(PluginError, match="'ping' is registered by both 'first' and 'second'"):
        create_app("svc", make_config(), plugins=[Pinger("first"), Pinger("second")])


async def test_app_state_reaches_handlers_and_a_key_set_twice_stops_start_up(aiohttp_client, make_config):
    greeting = web.AppKey("sample.greeting", str)
    table = web.RouteTableDef()

    @table.get("/api/v1/greeting")
    async def greet(request):
        return web.json_response({"greeting": request.config_dict[greeting]})

    class Greeter(Plugin):
        def __init__(self, name, routes=None):
            self.name, self.table = name, routes

        def setup(self, registrar):
            registrar.app_state(greeting, "hello")
            if self.table is not None:
                registrar.routes(self.table)

    client = await aiohttp_client(create_app("svc", make_config(), plugins=[Greeter("one", table)]))
    assert await (await client.get("/api/v1/greeting")).json() == {"greeting": "hello"}
    with pytest.raises(PluginError, match="sample.greeting.* is set by both 'one' and 'two'"):
        create_app("svc", make_config(), plugins=[Greeter("one"), Greeter("two")])


def test_disabled_plugin_is_not_loaded(make_config):
    config = make_config({"plugins": {"b": {"enabled": False}}})
    chosen = select_plugins(["a", "b"], {"a": Recorder("a"), "b": Recorder("b")}, config)
    assert [p.name for p in chosen] == ["a"]


def test_a_plugin_that_fails_in_setup_is_named(make_config):
    class Broken(Plugin):
        name = "broken"

        def setup(self, registrar):
            raise ValueError("bad setting")

    with pytest.raises(PluginError, match="'broken' failed to set up.*bad setting"):
        create_app("svc", make_config(), plugins=[Broken()])


async def test_lifespan_job_and_offered_service(aiohttp_client, config):
    plugin = SamplePlugin()
    app = create_app("svc", config, plugins=[plugin])
    client = await aiohttp_client(app)
    await asyncio.sleep(0.05)
    assert plugin.events[:2] == ["start", "job"]
    assert get_context(app).contracts.require(ECHO)("hi") == "hi"
    with pytest.raises(LookupError, match="no plugin in this service provides 'missing'"):
        get_context(app).contracts.require(ContractKey("missing"))
    await client.close()
    assert plugin.events[-1] == "stop"


class AdminFrames(Plugin):
    """A third party's frame handler that only the administrator may use, on a socket it
    does not own."""
    name = "admin_frames"

    def __init__(self, table):
        self.table = table

    def setup(self, registrar):
        registrar.routes(self.table)

        @registrar.ws_message("whoami")
        async def whoami(connection, message):
            connection.send({"type": "you_are", "user_id": require_admin(connection).user_id})


async def test_websocket_frames_are_dispatched_by_type_and_validated(aiohttp_client, config):
    async def socket(request):
        """An endpoint's own handshake: here the query names who connects; errors get a field
        of the endpoint's protocol."""
        identity = Identity(request.query["user"], request.query["user"], is_admin=request.query["user"] == "admin")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        connection = await get_context(request).hub.register(ws, identity.user_id, identity=identity)
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    await dispatch_frame(request.app, connection, frame.data, error_fields={"channel": "test"})
        finally:
            await get_context(request).hub.unregister(connection)
        return ws

    table = web.RouteTableDef()
    table.get("/ws/test")(socket)
    client = await aiohttp_client(create_app("svc", config, plugins=[SamplePlugin(), AdminFrames(table)]))
    async with client.ws_connect("/ws/test?user=user_tester") as ws:
        await ws.send_json({"type": "sample_ping", "text": "hi"})
        assert await ws.receive_json() == {"type": "sample_pong", "text": "hi"}
        await ws.send_str("{not json")
        reply = await ws.receive_json()
        assert "not valid JSON" in reply["error"] and reply["channel"] == "test"
        await ws.send_json({"type": "sample_ping"})
        reply = await ws.receive_json()
        assert reply["type"] == "error" and "text" in reply["error"]
        await ws.send_json({"type": "nope"})
        assert "unknown message type 'nope'" in (await ws.receive_json())["error"]
        await ws.send_json({"type": "whoami"})  # a handler's ApiError is an error frame
        assert await ws.receive_json() == {"type": "error", "error": "This operation is limited to the administrator.",
                                           "channel": "test", "errorType": "admin_only",
                                           "hint": "Log in with the administrator account."}
        await ws.send_json({"type": "sample_ping", "text": "still open"})
        assert (await ws.receive_json())["text"] == "still open"
    async with client.ws_connect("/ws/test?user=admin") as ws:
        await ws.send_json({"type": "whoami"})
        assert await ws.receive_json() == {"type": "you_are", "user_id": "admin"}


def test_gateway_plugins_command_lists_routes_and_versions():
    result = CliRunner().invoke(gateway_cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    import json
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert rows["weather_example"]["version"] == "0.3.1"
    assert rows["weather_example"]["routes"] == ["GET /api/v1/weather-example"]


def test_every_registrar_call_and_context_attribute_is_documented():
    """A hook a plugin author cannot read about does not exist for them (datasette's rule)."""
    import inspect
    from pathlib import Path

    from gateway.context import Context
    from gateway.plugins import Registrar

    documentation = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    registrar_calls = [name for name, _ in inspect.getmembers(Registrar) if not name.startswith("_")]
    context_attributes = ["config", "db", "bus", "http", "scheduler", "hub", "blobs", "contracts"]
    undocumented = [name for name in registrar_calls + context_attributes if f"`{name}" not in documentation]
    assert undocumented == []
    assert all(hasattr(Context, name) or name in {"config", "hub", "contracts"} for name in context_attributes)


def test_a_context_resource_is_refused_until_the_service_has_set_it():
    """`context.bus` and its like raise a clear error before start-up, then read as plain
    attributes (they are read for every frame of a reply)."""
    from gateway.config import Config
    from gateway.context import Context

    context = Context("svc", Config.load(overrides={}, environ={}))
    with pytest.raises(RuntimeError, match="context.bus is not available"):
        context.bus
    assert not context.has("bus")
    marker = object()
    context.bus = marker  # type: ignore[assignment]
    assert context.bus is marker and context.has("bus")
    assert "bus" in vars(context)  # no descriptor between: an attribute of the instance
