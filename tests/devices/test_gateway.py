"""The gateway's devices in front of the real IoT service: the four `/api/v1/devices*` endpoints
(the service's answers and refusals passed on, each person scoped to their own home, the
administrator's choice of person, 502 `iot_service_unreachable` when the service is away), the
`DEVICES` contract, and the feed: a change reaching every connected device of its owner over
/ws/chat and nobody else's, the feed reopened after the service restarts, and two gateway
instances on one Redis sending each change once, the second taking the feed over when the first
stops."""
from __future__ import annotations

import asyncio

from gateway.context import CONTEXT
from plugins.iot.contract import DEVICES, DeviceChange, DeviceError
from plugins.iot.gateway import FEED
from tests.devices.conftest import (ADMIN, ALICE, BOB, SERVICE, chat_socket, following, frames_of_type,
                                    nothing_of_type, operate, service_history, url_of)
from tests.support.asyncapi import FrameChecker
from tests.support.servers import free_port
from tests.system.test_openapi_documents import Conformance

SIMULATED = {"bedroom_light", "bedroom_ac", "bedroom_temperature", "bedroom_humidity", "living_room_light",
             "living_room_ac", "living_room_curtain", "front_door_lock"}


async def test_a_person_lists_reads_operates_and_reads_the_history_of_their_devices(home):
    gateway = home.gateway
    assert (await gateway.get("/api/v1/devices")).status == 401

    response = await gateway.get("/api/v1/devices", headers=ALICE)
    listing = await response.json()
    assert response.status == 200 and listing["count"] == 8
    assert {device["id"] for device in listing["devices"]} == SIMULATED
    light = next(device for device in listing["devices"] if device["id"] == "living_room_light")
    assert light["names"]["zh"] and light["room"] == "living_room" and light["type"] == "light"

    response = await gateway.get("/api/v1/devices", headers=ALICE, params={"room": "bedroom"})
    assert {device["id"] for device in (await response.json())["devices"]} == \
        {"bedroom_light", "bedroom_ac", "bedroom_temperature", "bedroom_humidity"}
    response = await gateway.get("/api/v1/devices", headers=ALICE, params={"type": "light"})
    assert {device["id"] for device in (await response.json())["devices"]} == {"bedroom_light", "living_room_light"}

    response = await gateway.get("/api/v1/devices/bedroom_ac", headers=ALICE)
    assert response.status == 200 and (await response.json())["device"]["type"] == "air_conditioner"

    # A person's operation is recorded as theirs ("api"), whatever source they claim.
    answer = await operate(gateway, "bedroom_ac", {"action": "set", "properties": {"mode": "cool",
                                                                                   "target_temperature": 24},
                                                   "source": "assistant"})
    assert answer["success"] is True and answer["device"]["state"]["target_temperature"] == 24
    assert answer["operation"]["source"] == "api" and answer["operation"]["user_id"] == "user_alice"
    await operate(gateway, "bedroom_ac", {"action": "switch", "value": True})

    response = await gateway.get("/api/v1/devices/bedroom_ac/history", headers=ALICE, params={"limit": 1})
    history = await response.json()
    assert response.status == 200 and history["count"] == 1 and history["total"] == 2
    assert history["operations"][0]["action"] == "switch"
    response = await gateway.get("/api/v1/devices/bedroom_ac/history", headers=ALICE, params={"offset": 1})
    assert (await response.json())["operations"][0]["id"] == answer["operation"]["id"]

    # Another service (the assistant's tools) says who it acts as.
    answer = await operate(gateway, "bedroom_light", {"action": "switch", "value": True, "source": "assistant"},
                           headers=SERVICE, user_id="user_alice")
    assert answer["operation"]["source"] == "assistant"


async def test_each_person_has_their_own_home_and_the_administrator_may_name_anyone(home):
    gateway = home.gateway
    await operate(gateway, "living_room_curtain", {"action": "set", "property": "position", "value": 40})
    bob_history = await (await gateway.get("/api/v1/devices/living_room_curtain/history", headers=BOB)).json()
    assert bob_history["total"] == 0

    response = await gateway.get("/api/v1/devices/living_room_curtain", headers=BOB, params={"user_id": "user_alice"})
    assert response.status == 403 and (await response.json())["errorType"] == "forbidden"
    response = await gateway.get("/api/v1/devices/living_room_curtain", headers=ADMIN,
                                 params={"user_id": "user_alice"})
    assert (await response.json())["device"]["state"]["position"] == 40
    await operate(gateway, "living_room_curtain", {"action": "set", "property": "position", "value": 0},
                  headers=ADMIN, user_id="user_alice")
    history = await service_history(home.iot_url, "living_room_curtain", "user_alice")
    assert [operation["changes"]["position"]["to"] for operation in history] == [0, 40]


async def test_the_services_refusals_come_back_as_they_were_answered(home):
    gateway = home.gateway
    before = (await (await gateway.get("/api/v1/devices/living_room_light", headers=ALICE)).json())["device"]
    body = await operate(gateway, "living_room_light", {"action": "set", "property": "brightness", "value": 150},
                         expect=400)
    assert body["errorType"] == "invalid_operation" and "brightness" in body["error"] and "100" in body["error"]
    body = await operate(gateway, "bedroom_ac", {"action": "set", "property": "mode", "value": "turbo"}, expect=400)
    assert body["errorType"] == "invalid_operation" and "cool" in body["error"]
    body = await operate(gateway, "bedroom_temperature", {"action": "set", "property": "temperature", "value": 20},
                         expect=400)
    assert body["errorType"] == "invalid_operation" and "read-only" in body["error"]
    body = await operate(gateway, "garage_door", {"action": "switch", "value": True}, expect=404)
    assert body["errorType"] == "device_not_found"
    response = await gateway.get("/api/v1/devices/garage_door/history", headers=ALICE)
    assert response.status == 404 and (await response.json())["errorType"] == "device_not_found"

    # What the gateway itself checks: the shape of the body.
    body = await operate(gateway, "living_room_light", {"action": "jump"}, expect=400)
    assert body["errorType"] == "validation_error" and "action" in body["error"]
    response = await gateway.post("/api/v1/devices/living_room_light/operate", headers=ALICE, data=b"{not json")
    assert response.status == 400 and (await response.json())["errorType"] == "invalid_json"
    # A number no float holds (10**309 written out; 1e309, which JSON reads as inf): the IoT
    # service's math.isfinite raised OverflowError on the first, a 500.
    for value in (10**309, "1e309"):
        response = await gateway.post("/api/v1/devices/living_room_light/operate",
                                      headers={**ALICE, "Content-Type": "application/json"},
                                      data=f'{{"action": "set", "property": "brightness", "value": {value}}}')
        body = await response.json()
        assert response.status == 400 and body["errorType"] == "validation_error" and "finite" in body["error"], body
    response = await gateway.get("/api/v1/devices/bedroom_ac/history", headers=ALICE, params={"limit": 500})
    assert response.status == 400 and (await response.json())["errorType"] == "validation_error"
    # None of the refused operations changed a thing.
    after = (await (await gateway.get("/api/v1/devices/living_room_light", headers=ALICE)).json())["device"]
    assert after["state"] == before["state"]
    assert all(not operation["success"] for operation in
               await service_history(home.iot_url, "living_room_light", "user_alice"))


async def test_unlocking_refused_by_the_operator_is_a_403(make_iot_service, make_gateway):
    iot = await make_iot_service({"allow_remote_unlock": False})
    gateway = await make_gateway(url_of(iot))
    await operate(gateway, "front_door_lock", {"action": "switch", "value": True})
    body = await operate(gateway, "front_door_lock", {"action": "switch", "value": False}, expect=403)
    assert body["errorType"] == "operation_refused" and body["error"]
    history = await (await gateway.get("/api/v1/devices/front_door_lock/history", headers=ALICE)).json()
    assert history["operations"][0]["success"] is False


async def test_an_iot_service_that_cannot_be_reached_is_a_502_never_a_500(make_gateway):
    gateway = await make_gateway(f"http://127.0.0.1:{free_port()}")
    for method, path, body in [("GET", "/api/v1/devices", None), ("GET", "/api/v1/devices/bedroom_ac", None),
                               ("POST", "/api/v1/devices/bedroom_ac/operate", {"action": "switch", "value": True}),
                               ("GET", "/api/v1/devices/bedroom_ac/history", None)]:
        response = await gateway.request(method, path, headers=ALICE, json=body)
        answer = await response.json()
        assert response.status == 502 and answer["errorType"] == "iot_service_unreachable", answer
        assert "IOT_SERVICE_URL" in answer["hint"]


async def test_a_service_that_refuses_the_gateways_credential_is_a_502(make_iot_service, make_gateway):
    iot = await make_iot_service()
    gateway = await make_gateway(url_of(iot), overrides={"auth.service_token": "another-token"})
    response = await gateway.get("/api/v1/devices", headers=ALICE)
    answer = await response.json()
    assert response.status == 502 and answer["errorType"] == "iot_service_unreachable"
    assert "SERVICE_TOKEN" in answer["hint"]


async def test_the_devices_contract(home):
    context = home.gateway.server.app[CONTEXT]
    devices = context.contracts.require(DEVICES)
    heard: list[DeviceChange] = []
    arrived = asyncio.Event()

    async def listener(change: DeviceChange) -> None:
        heard.append(change)
        arrived.set()

    devices.on_change(listener)
    assert {device["id"] for device in await devices.list("user_carol")} == SIMULATED
    assert (await devices.get("user_carol", "bedroom_light"))["id"] == "bedroom_light"
    done = await devices.operate("user_carol", "bedroom_light", {"action": "set", "property": "brightness",
                                                                 "value": 35}, source="automation:r1")
    assert done["device"]["state"]["brightness"] == 35 and done["operation"]["source"] == "automation:r1"
    await asyncio.wait_for(arrived.wait(), 10)
    change = heard[0]
    assert (change.user_id, change.device_id, change.cause) == ("user_carol", "bedroom_light", "operation")
    assert change.changes["brightness"]["to"] == 35 and change.device["state"]["brightness"] == 35
    assert change.event_id and change.timestamp

    try:
        await devices.get("user_carol", "no_such_device")
    except DeviceError as error:
        assert (error.status, error.error_type) == (404, "device_not_found")
    else:
        raise AssertionError("a missing device must raise DeviceError")
    try:
        await devices.operate("user_carol", "bedroom_light", {"action": "set", "property": "brightness",
                                                              "value": -1}, source="automation:r1")
    except DeviceError as error:
        assert (error.status, error.error_type) == (400, "invalid_operation")
    else:
        raise AssertionError("an invalid operation must raise DeviceError")


async def test_a_change_reaches_every_device_of_its_owner_and_nobody_else(home):
    gateway = home.gateway
    checker = FrameChecker(await (await gateway.get("/api/v1/asyncapi.json")).json())
    phone = await chat_socket(gateway, ALICE, client_id="phone")
    laptop = await chat_socket(gateway, ALICE, session_id="other-session", client_id="laptop")
    stranger = await chat_socket(gateway, BOB, client_id="bob-phone")
    try:
        answer = await operate(gateway, "living_room_light", {"action": "switch", "value": True})
        for ws in (phone, laptop):
            frame, = await frames_of_type(ws, "device_update")
            checker.check(frame)
            assert frame["device_id"] == "living_room_light" and frame["device"]["state"]["on"] is True
            assert frame["changes"]["on"]["to"] is True and frame["cause"] == "operation"
            assert frame["operation_id"] == answer["operation"]["id"]
            assert isinstance(frame["timestamp"], int) and frame["timestamp"] > 1_700_000_000_000
        await nothing_of_type(stranger, "device_update")
        await nothing_of_type(phone, "device_update", wait=0.3)  # once, not twice
    finally:
        for ws in (phone, laptop, stranger):
            await ws.close()


async def test_the_feed_opens_again_after_the_iot_service_restarts(make_iot_service, make_gateway):
    port = free_port()
    iot = await make_iot_service(port=port)
    gateway = await make_gateway(url_of(iot))
    await following(gateway)
    await iot.close()
    feed = gateway.server.app[FEED]
    for _ in range(200):
        if not feed.following.is_set():
            break
        await asyncio.sleep(0.02)
    assert not feed.following.is_set()
    response = await gateway.get("/api/v1/devices", headers=ALICE)
    assert response.status == 502

    await make_iot_service(port=port)
    await following(gateway)
    ws = await chat_socket(gateway, ALICE)
    try:
        await operate(gateway, "bedroom_light", {"action": "switch", "value": True})
        frame, = await frames_of_type(ws, "device_update")
        assert frame["device_id"] == "bedroom_light"
    finally:
        await ws.close()


async def test_two_gateway_instances_send_each_change_once_and_hand_the_feed_over(
        make_iot_service, make_gateway, redis_url, bus_prefix):
    iot = await make_iot_service()
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    # A lease long enough that a busy machine never lets it lapse between renewals here.
    first = await make_gateway(url_of(iot), overrides=shared, settings={"feed_lease_seconds": 3.0})
    second = await make_gateway(url_of(iot), overrides=shared, settings={"feed_lease_seconds": 3.0})
    await following(first, second)
    await asyncio.sleep(0.3)  # a few renewals: still one holder
    holders = [gateway for gateway in (first, second) if gateway.server.app[FEED].following.is_set()]
    assert len(holders) == 1
    holder, other = holders[0], (second if holders[0] is first else first)

    heard: list[tuple[str, str]] = []
    for name, gateway in (("holder", holder), ("other", other)):
        async def listener(change: DeviceChange, name: str = name) -> None:
            heard.append((name, change.event_id))
        gateway.server.app[CONTEXT].contracts.require(DEVICES).on_change(listener)

    phone = await chat_socket(holder, ALICE, client_id="phone")
    laptop = await chat_socket(other, ALICE, client_id="laptop")
    try:
        await operate(other, "living_room_ac", {"action": "switch", "value": True})
        for ws in (phone, laptop):
            frame, = await frames_of_type(ws, "device_update")
            assert frame["device_id"] == "living_room_ac"
            await nothing_of_type(ws, "device_update", wait=0.4)
    finally:
        await phone.close()
    # The contract's listeners heard it once, on the instance holding the feed.
    assert heard == [("holder", frame["event_id"])]

    # The holder stops: the other instance takes the feed over and the change still arrives.
    await holder.close()
    await following(other)
    try:
        await operate(other, "living_room_ac", {"action": "switch", "value": False})
        frame, = await frames_of_type(laptop, "device_update")
        assert frame["changes"]["on"] == {"from": True, "to": False}
    finally:
        await laptop.close()


async def test_the_answers_fit_the_gateways_document(home, make_gateway):
    gateway = home.gateway
    api = Conformance(gateway, await (await gateway.get("/api/v1/openapi.json")).json())
    one = "/api/v1/devices/{device_id}"
    await api.call("GET", "/api/v1/devices", headers=ALICE)
    await api.call("GET", "/api/v1/devices", headers=ALICE, params={"room": "bedroom", "type": "light"})
    await api.call("GET", "/api/v1/devices/bedroom_ac", one, headers=ALICE)
    await api.call("POST", "/api/v1/devices/bedroom_ac/operate", one + "/operate", headers=ALICE,
                   json={"action": "set", "properties": {"mode": "heat", "target_temperature": 21.5}})
    await api.call("GET", "/api/v1/devices/bedroom_ac/history", one + "/history", headers=ALICE)
    for status, options in [(400, {"json": {"action": "set", "property": "fan", "value": "storm"}}),
                            (400, {"json": {"action": 3}}), (401, {"json": {"action": "switch", "value": True}})]:
        headers = {} if status == 401 else ALICE
        answered, _ = await api.call("POST", "/api/v1/devices/bedroom_ac/operate", one + "/operate",
                                     headers=headers, **options)
        assert answered == status
    answered, _ = await api.call("GET", "/api/v1/devices/nowhere", one, headers=ALICE)
    assert answered == 404
    answered, _ = await api.call("GET", "/api/v1/devices", headers=BOB, params={"user_id": "user_alice"})
    assert answered == 403

    away = await make_gateway(f"http://127.0.0.1:{free_port()}")
    api = Conformance(away, await (await away.get("/api/v1/openapi.json")).json())
    for path, template in [("/api/v1/devices", "/api/v1/devices"), ("/api/v1/devices/bedroom_ac", one),
                           ("/api/v1/devices/bedroom_ac/history", one + "/history")]:
        answered, _ = await api.call("GET", path, template, headers=ALICE)
        assert answered == 502
