"""The gateway's side of the devices (plugin `devices`, docs/iot.md, "In the gateway").

- The `DEVICES` contract (contract.py) for the gateway's other plugins (automation): the
  person's devices, operating one, and every change of any device once.
- The spec's `/api/v1/devices*` endpoints for people: the IoT service's own answers, passed on,
  each person scoped to their own devices (the administrator may name anyone).
- The feed (feed.py): one gateway instance at a time follows the IoT service's change stream and
  turns each change into a `device_update` frame to the owner's devices and a call of the
  contract's listeners.

Every call goes to the IoT service (`peers.iot_service_url`, IOT_SERVICE_URL) with the service
credential acting for a named person, through `IotTransport`, over the core's peer transport
(gateway/peers.py): one time limit, one mapping of "no usable answer" to 502
`iot_service_unreachable`, the service's own error body passed on with its status."""
from __future__ import annotations

import logging
from typing import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from gateway.context import Context
from gateway.identity import Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.peers import PeerClient, PeerTimeout
from gateway.plugins import Plugin, Registrar
from gateway.validation import parse_body, parse_query

from .contract import DEVICES, DeviceChange, DeviceError
from .feed import DeviceFeed
from .gateway_schemas import DeviceUpdateFrame, HistoryQuery, ListQuery, OperateBody, OwnerQuery
from .schemas import DeviceAnswer, DeviceList, HistoryPage, OperateAnswer
from .settings import DevicesSettings

log = logging.getLogger("plugins.iot.gateway")

PEER = "iot_service"
DEVICES_PATH = "/api/v1/devices"
# The source recorded for an operation a person asks for through these endpoints.
PERSON_SOURCE = "api"


class IotTransport(PeerClient):
    """Calls to the IoT service over the core's peer transport. Every way of not getting a usable
    answer is a DeviceError 502 `iot_service_unreachable`; its own error body a DeviceError with
    its status. A 403 `operation_refused` is its answer about the operation (a protected lock),
    not about our credential."""

    def __init__(self, context: Context, timeout: PeerTimeout):
        super().__init__(context, PEER, service="IoT service", timeout=timeout, error_prefix="iot_service",
                         unreachable=DeviceError, passed_refusals=("operation_refused",))

    async def answer(self, method: str, path: str, *, params: dict | None = None,
                     body: dict | None = None) -> tuple[int, dict]:
        """The status and JSON object of a call that succeeded; the service's refusal as a
        DeviceError. `path` is percent-encoded (`device_path`)."""
        answer = await self.request(method, path, params=params, json_body=body, quoted=True)
        if answer.status >= 400:
            raise self.refusal(answer)
        decoded = answer.json()
        if decoded is None:
            raise self.unreachable(f"The IoT service answered {answer.status} without a JSON object.",
                                   peer_status=answer.status)
        return answer.status, decoded

    async def ok(self, method: str, path: str, *, params: dict | None = None, body: dict | None = None) -> dict:
        """The answer of a call that succeeded; the service's refusal as a DeviceError."""
        return (await self.answer(method, path, params=params, body=body))[1]


def device_path(device_id: str, *tail: str) -> str:
    """The service's path of one device; the id quoted whole (an MQTT device's id may hold any character)."""
    return "/".join((DEVICES_PATH, quote(device_id, safe=""), *tail))


class DevicesClient:
    """The `DEVICES` contract over the IoT service; every call names the person it acts for."""

    def __init__(self, transport: IotTransport):
        self.transport = transport
        self.listeners: list[Callable[[DeviceChange], Awaitable[None]]] = []

    async def list(self, user_id: str) -> list[dict]:
        answer = await self.transport.ok("GET", DEVICES_PATH, params={"user_id": user_id})
        return list(answer["devices"])

    async def get(self, user_id: str, device_id: str) -> dict:
        answer = await self.transport.ok("GET", device_path(device_id), params={"user_id": user_id})
        return dict(answer["device"])

    async def operate(self, user_id: str, device_id: str, operation: dict, *, source: str) -> dict:
        answer = await self.transport.ok("POST", device_path(device_id, "operate"), params={"user_id": user_id},
                                         body={**operation, "source": source})
        return {"device": answer["device"], "operation": answer["operation"]}

    def on_change(self, listener: Callable[[DeviceChange], Awaitable[None]]) -> None:
        self.listeners.append(listener)


# ---------------------------------------------------------------- the endpoints

routes = web.RouteTableDef()
CLIENT = web.AppKey("devices.client", DevicesClient)
FEED = web.AppKey("devices.feed", DeviceFeed)
# 403: a person naming someone else with user_id, or an operation refused; 503: the service's own outage.
ERRORS = (403, 404, 502, 503)
DEVICE_ID = {"device_id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,128}$",
                           "description": "The device's id, e.g. `living_room_light`."}}


async def pass_on(request: web.Request, method: str, path: str, *, params: dict,
                  body: dict | None = None) -> web.Response:
    """The IoT service's answer to `method path`, passed on with its status and body."""
    status, answer = await request.config_dict[CLIENT].transport.answer(method, path, params=params, body=body)
    return web.json_response(answer, status=status)


def device_id_of(request: web.Request) -> str:
    return request.match_info["device_id"]


@routes.get(DEVICES_PATH, name="devices.list")
@api_doc("Your devices and their states (the administrator: anyone's, with user_id)", query=ListQuery,
         responses={200: DeviceList}, errors=(403, 502, 503), tags=("devices",))
async def list_devices(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, ListQuery())
    return await pass_on(request, "GET", DEVICES_PATH, params={
        "user_id": owner_for(identity, query["user_id"]), "room": query["room"], "type": query["type"]})


@routes.get(DEVICES_PATH + "/{device_id}", name="devices.get")
@api_doc("One of your devices", query=OwnerQuery, responses={200: DeviceAnswer}, errors=ERRORS,
         path=DEVICE_ID, tags=("devices",))
async def get_device(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, OwnerQuery())
    return await pass_on(request, "GET", device_path(device_id_of(request)),
                         params={"user_id": owner_for(identity, query["user_id"])})


def source_for(identity: Identity, asked: str | None) -> str:
    """Another service (the assistant's tools, automation over HTTP) says who it acts as; a
    person's operation is always theirs, `api`."""
    return (asked or PERSON_SOURCE) if identity.kind == "service" else PERSON_SOURCE


@routes.post(DEVICES_PATH + "/{device_id}/operate", name="devices.operate")
@api_doc("Operate one of your devices: switch it, or set one property or several at once",
         body=OperateBody, query=OwnerQuery, responses={200: OperateAnswer}, errors=ERRORS,
         path=DEVICE_ID, tags=("devices",),
         description="A value out of range, an unknown property or an option the device does not have is a 400 "
                     "`invalid_operation` naming the property and what it takes; unlocking a lock the operator "
                     "protects is a 403 `operation_refused`; a real device that is offline is a 502/503 "
                     "`device_unreachable`. Every device of the owner then receives a `device_update` frame.")
async def operate_device(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, OwnerQuery())
    body = await parse_body(request, OperateBody())
    body["source"] = source_for(identity, body.get("source"))
    return await pass_on(request, "POST", device_path(device_id_of(request), "operate"),
                         params={"user_id": owner_for(identity, query["user_id"])}, body=body)


@routes.get(DEVICES_PATH + "/{device_id}/history", name="devices.history")
@api_doc("A device's operations, newest first (successful and refused ones)", query=HistoryQuery,
         responses={200: HistoryPage}, errors=ERRORS, path=DEVICE_ID, tags=("devices",))
async def device_history(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, HistoryQuery())
    return await pass_on(request, "GET", device_path(device_id_of(request), "history"), params={
        "user_id": owner_for(identity, query["user_id"]), "limit": query["limit"], "offset": query["offset"]})


# ---------------------------------------------------------------- the plugin

class DevicesPlugin(Plugin):
    name = "devices"
    depends = ("auth_tokens",)
    description = "The person's devices (the IoT service): /api/v1/devices, device_update frames, DEVICES"
    settings_class = DevicesSettings

    def setup(self, registrar: Registrar[DevicesSettings]) -> None:
        settings = registrar.settings
        transport = IotTransport(registrar.context,
                                 PeerTimeout.from_config(registrar.context.config, total=settings.timeout))
        client = DevicesClient(transport)
        registrar.provide(DEVICES, client)
        registrar.app_state(CLIENT, client)
        registrar.routes(routes)
        registrar.ws_server_message("device_update", DeviceUpdateFrame,
                                    "A device of the person changed (an operation by anyone, a simulated reading "
                                    "drifting, a real device reporting): sent to each of their connected devices.")
        if settings.feed:
            feed = DeviceFeed(registrar.context, settings, client.listeners, transport)
            registrar.app_state(FEED, feed)
            registrar.job("feed", feed.run)


plugin = DevicesPlugin()
