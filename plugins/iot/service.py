"""The IoT service's plugin `iot` (iot-debug-service, docs/iot.md): devices under
`/api/v1/devices` — list, one, operate, history — and the WebSocket that pushes every state
change. Callers: a person's access token (their own devices) or the service credential and the
administrator (anyone's, named with `user_id`; without it, the administrator's own home)."""
from __future__ import annotations

from aiohttp import WSMsgType, web

from gateway.asyncapi import websocket_endpoint
from gateway.connection import Connection
from gateway.context import Context, get_context
from gateway.identity import ADMIN_USER_ID, Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.plugins import JobFactory, Plugin, Registrar
from gateway.validation import parse_body, parse_query
from gateway.ws import dispatch_frame, error_frame

from .adapters import SimulationAdapter
from .devices import EVERY_OWNER, DeviceAdapter, DeviceService
from .model import timestamp
from .schemas import (DeviceAnswer, DeviceList, DeviceListQuery, DeviceRemovedFrame, DeviceUpdateFrame,
                      HistoryPage, HistoryQuery, OperateAnswer, OperateBody, OwnerQuery, PongFrame, WatchQuery)
from .settings import IotSettings

routes = web.RouteTableDef()
SERVICE = web.AppKey("iot.service", DeviceService)
SETTINGS = web.AppKey("iot.settings", IotSettings)
DEVICE_ID = {"device_id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$"}}
ONE = "/api/v1/devices/{device_id:[A-Za-z0-9_.-]{1,128}}"


def owner_of(identity: Identity, requested: str | None) -> str:
    """Whose devices: a person's own; the administrator's own or the `user_id` named; the
    service credential's the `user_id` named, else the administrator's home: the console's
    IoT panel calls `/api/v1/devices` bare (spec/console.md, one set of eight devices)."""
    if identity.kind == "service" and not requested:
        return ADMIN_USER_ID
    return owner_for(identity, requested)


# Before the one-device route, which "ws" would match too.
@routes.get("/api/v1/devices/ws", name="iot.ws", allow_head=False)
@websocket_endpoint("Device state changes as they happen (device_update frames)", query=WatchQuery)
@api_doc("Watch device state changes (WebSocket upgrade; frames: the AsyncAPI document)", query=WatchQuery,
         responses={101: None}, errors=(400, 403), headers={"Upgrade": "`websocket`"},
         description="A person receives their own devices' changes; the service credential every owner's "
                     "(or `user_id`'s); the administrator their own or `user_id`'s.")
async def watch(request: web.Request) -> web.StreamResponse:
    identity = await require_user(request)
    query = parse_query(request, WatchQuery())
    if identity.kind == "service" and not query["user_id"]:
        key = EVERY_OWNER
    else:
        key = owner_for(identity, query["user_id"])
    settings = request.config_dict[SETTINGS]
    ws = web.WebSocketResponse(heartbeat=settings.heartbeat_seconds, max_msg_size=64 * 1024)  # pings only
    await ws.prepare(request)
    hub = get_context(request).hub
    connection = await hub.register(ws, key, identity=identity, max_pending=settings.max_pending_frames)
    try:
        async for frame in ws:
            if frame.type == WSMsgType.TEXT:
                await dispatch_frame(request.app, connection, frame.data)
            elif frame.type == WSMsgType.BINARY:
                connection.send(error_frame("binary frames are not accepted; send JSON text"))
            elif frame.type == WSMsgType.ERROR:
                break
    finally:
        await hub.unregister(connection)
    return ws


@routes.get("/api/v1/devices", name="iot.list")
@api_doc("The owner's devices with their state and properties", query=DeviceListQuery,
         responses={200: DeviceList}, errors=(403, 503))
async def list_devices(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, DeviceListQuery())
    owner = owner_of(identity, query["user_id"])
    devices = await request.config_dict[SERVICE].list_devices(owner, query["room"], query["type"])
    return web.json_response({"devices": [device.public() for device in devices], "count": len(devices)})


@routes.get(ONE, name="iot.get")
@api_doc("One device", query=OwnerQuery, responses={200: DeviceAnswer}, errors=(403, 404, 503), path=DEVICE_ID)
async def get_device(request: web.Request) -> web.Response:
    identity = await require_user(request)
    owner = owner_of(identity, parse_query(request, OwnerQuery())["user_id"])
    device = await request.config_dict[SERVICE].get(owner, request.match_info["device_id"])
    return web.json_response({"device": device.public()})


@routes.post(ONE + "/operate", name="iot.operate")
@api_doc("Operate a device: switch it, or set one or several properties (all or nothing)", query=OwnerQuery,
         body=OperateBody, responses={200: OperateAnswer}, errors=(403, 404, 503), path=DEVICE_ID,
         description="400 `invalid_operation` names the property and its range or options; 403 "
                     "`operation_refused`: unlocking refused by the operator's configuration (recorded as a "
                     "failed operation); 503 `device_unreachable`: a real device offline.")
async def operate(request: web.Request) -> web.Response:
    identity = await require_user(request)
    owner = owner_of(identity, parse_query(request, OwnerQuery())["user_id"])
    body = await parse_body(request, OperateBody())
    source = body.pop("source")
    outcome = await request.config_dict[SERVICE].operate(owner, request.match_info["device_id"], body,
                                                         actor=identity.user_id, source=source)
    return web.json_response({"success": True, "device": outcome.device.public(), "operation": outcome.operation})


@routes.get(ONE + "/history", name="iot.history")
@api_doc("A device's operations, newest first (paged)", query=HistoryQuery, responses={200: HistoryPage},
         errors=(403, 404, 503), path=DEVICE_ID)
async def history(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, HistoryQuery())
    owner = owner_of(identity, query["user_id"])
    operations, total = await request.config_dict[SERVICE].history(owner, request.match_info["device_id"],
                                                                    query["limit"], query["offset"])
    return web.json_response({"operations": operations, "count": len(operations), "total": total})


class IotPlugin(Plugin):
    name = "iot"
    depends = ("auth_tokens",)
    uses = ("database",)
    description = "Devices: each person's simulated home and real devices over MQTT (Home Assistant discovery)"
    settings_class = IotSettings

    def setup(self, registrar: Registrar[IotSettings]) -> None:
        settings = registrar.settings
        service = DeviceService(registrar.context, settings)
        registrar.migrations("plugins.iot")
        registrar.routes(routes)
        registrar.app_state(SERVICE, service)
        registrar.app_state(SETTINGS, settings)
        registrar.ws_server_message("device_update", DeviceUpdateFrame,
                                    "A device's state changed (an operation, the simulation, an MQTT message).")
        registrar.ws_server_message("device_removed", DeviceRemovedFrame,
                                    "A device is gone (an MQTT device announced with an empty config).")
        registrar.ws_server_message("pong", PongFrame, "The answer to a `ping` frame.")

        @registrar.ws_message("ping")
        async def on_ping(connection: Connection, frame: dict) -> None:
            connection.send({"type": "pong", "timestamp": timestamp()})

        if "simulation" in settings.adapters:
            service.adapters["simulation"] = SimulationAdapter(service, settings.tick_seconds)
        if "mqtt" in settings.adapters:
            from .mqtt import MqttAdapter  # the MQTT client is imported only where it is used

            service.adapters["mqtt"] = MqttAdapter(service, settings)
        for adapter in service.adapters.values():
            registrar.job(adapter.name, _runner(adapter))


def _runner(adapter: DeviceAdapter) -> JobFactory:
    async def run(context: Context) -> None:
        await adapter.run()
    return run


plugin = IotPlugin()
