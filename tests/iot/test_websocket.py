"""The IoT service's WebSocket: every state change pushed to each subscriber allowed to see it —
an operation's, and the simulation's drift (a short tick) — and a subscriber that stops reading
is dropped without holding up the others."""
from __future__ import annotations

import asyncio

import aiohttp

from gateway.app import create_app
from gateway.context import get_context
from plugins.auth import tokens_plugin
from plugins.iot.service import plugin as iot_plugin
from tests.ai_core.conftest import SERVICE_TOKEN, access_token
from tests.iot.conftest import ALICE, SERVICE, operate


async def next_update(ws, timeout: float = 5.0, **expected) -> dict:
    """The next device_update frame whose fields include `expected`."""
    async def read() -> dict:
        while True:
            message = await ws.receive()
            assert message.type == aiohttp.WSMsgType.TEXT, message
            frame = message.json()
            if frame["type"] == "device_update" and all(frame.get(k) == v for k, v in expected.items()):
                return frame
    return await asyncio.wait_for(read(), timeout)


async def test_an_operation_reaches_its_owner_and_the_service_but_not_another_person(iot_service):
    alice = await iot_service.ws_connect(f"/api/v1/devices/ws?token={access_token('user_alice', 'alice')}")
    bob = await iot_service.ws_connect("/api/v1/devices/ws", headers={"Authorization":
                                                                       f"Bearer {access_token('user_bob', 'bob')}"})
    everyone = await iot_service.ws_connect(f"/api/v1/devices/ws?token={SERVICE_TOKEN}")
    just_bob = await iot_service.ws_connect(f"/api/v1/devices/ws?token={SERVICE_TOKEN}&user_id=user_bob")

    answer = await operate(iot_service, "living_room_light", {"action": "switch", "value": True, "source": "console"})
    for ws in (alice, everyone):
        frame = await next_update(ws, device_id="living_room_light")
        assert frame["user_id"] == "user_alice" and frame["cause"] == "operation"
        assert frame["changes"] == {"on": {"from": False, "to": True}}
        assert frame["operation_id"] == answer["operation"]["id"]
        assert frame["device"] == answer["device"] and len(frame["event_id"]) == 32
        assert frame["timestamp"].endswith("Z")

    await operate(iot_service, "bedroom_light", {"action": "switch", "value": True}, SERVICE, user_id="user_bob")
    for ws in (bob, just_bob, everyone):
        frame = await next_update(ws)
        assert (frame["user_id"], frame["device_id"]) == ("user_bob", "bedroom_light")
    # Alice heard nothing of Bob's light.
    await alice.send_json({"type": "ping"})
    message = await asyncio.wait_for(alice.receive(), 5)
    assert message.json()["type"] == "pong"

    await alice.send_str("not json")
    assert (await asyncio.wait_for(alice.receive(), 5)).json()["type"] == "error"
    for ws in (alice, bob, everyone, just_bob):
        await ws.close()


async def test_who_may_watch(iot_service):
    response = await iot_service.get("/api/v1/devices/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                                                    "Sec-WebSocket-Version": "13",
                                                                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert response.status == 401
    response = await iot_service.get("/api/v1/devices/ws", headers=ALICE, params={"user_id": "user_bob"})
    assert response.status == 403
    response = await iot_service.get("/api/v1/devices/ws", headers=ALICE)  # no upgrade
    assert response.status == 400 and (await response.json())["errorType"]


async def test_the_simulation_drifts_and_pushes_a_sensor_following_the_ac(make_iot_service):
    service = await make_iot_service({"tick_seconds": 0.05})
    ws = await service.ws_connect(f"/api/v1/devices/ws?token={access_token('user_alice', 'alice')}")
    await operate(service, "bedroom_ac", {"action": "set", "properties": {"on": True, "mode": "cool",
                                                                          "target_temperature": 16}})
    frame = await next_update(ws, device_id="bedroom_temperature", cause="simulation")
    change = frame["changes"]["temperature"]
    assert change["to"] < change["from"] and frame["operation_id"] is None
    assert frame["device"]["state"]["temperature"] == change["to"]
    # It keeps falling towards the target while the AC cools, and is stored.
    later = await next_update(ws, device_id="bedroom_temperature", cause="simulation")
    assert later["changes"]["temperature"]["to"] < change["to"]
    humidity = await next_update(ws, device_id="bedroom_humidity", cause="simulation")
    assert humidity["changes"]["humidity"]["to"] < humidity["changes"]["humidity"]["from"]
    response = await service.get("/api/v1/devices/bedroom_temperature", headers=ALICE)
    assert (await response.json())["device"]["state"]["temperature"] <= later["changes"]["temperature"]["to"]
    await ws.close()


async def test_a_subscriber_that_does_not_read_is_dropped_and_the_others_still_hear(make_iot_service):
    """Each subscriber has the hub's bounded queue (max_pending_frames); the hub closes one whose
    queue is full (tests/core/test_http.py floods one until it is). Here: a subscriber gone mid-way
    costs the others nothing."""
    service = await make_iot_service({"tick_seconds": 3600, "max_pending_frames": 7})
    token = access_token("user_alice", "alice")
    reader = await service.ws_connect(f"/api/v1/devices/ws?token={token}")
    leaving = await service.ws_connect(f"/api/v1/devices/ws?token={token}")
    hub = get_context(service.app).hub
    assert [connection.max_pending for connection in hub.connections("user_alice")] == [7, 7]
    for position in range(1, 30):
        if position == 10:
            leaving._response.connection.transport.abort()  # gone without a goodbye
        await operate(service, "living_room_curtain", {"action": "set", "property": "position", "value": position})
        frame = await next_update(reader, device_id="living_room_curtain")
        assert frame["device"]["state"]["position"] == position
    await reader.close()


async def test_changes_reach_subscribers_of_another_instance_and_nothing_else_crosses(
        aiohttp_client, iot_config, redis_url, bus_prefix):
    """Two instances on one Redis: a change made on one reaches a subscriber of the other; a frame
    another service's hub sends to the person (a chat reply) does not reach their device feed."""
    def build():
        config = iot_config({"tick_seconds": 3600}, {"bus.redis_url": redis_url, "bus.prefix": bus_prefix})
        return aiohttp_client(create_app("iot-debug-service", config, plugins=[tokens_plugin, iot_plugin]))
    first, second = await build(), await build()
    gateway_config = iot_config({"tick_seconds": 3600}, {"bus.redis_url": redis_url, "bus.prefix": bus_prefix})
    gateway = await aiohttp_client(create_app("gateway", gateway_config, plugins=[tokens_plugin]))
    ws = await second.ws_connect(f"/api/v1/devices/ws?token={access_token('user_alice', 'alice')}")
    # What the gateway's hub does for a chat reply, on the same Redis: addressed to the person.
    await get_context(gateway.app).hub.send_to_user("user_alice", {"type": "stream_chunk", "content": "hi"})
    await operate(first, "living_room_light", {"action": "switch", "value": True})
    frame = (await asyncio.wait_for(ws.receive(), 5)).json()
    assert frame["type"] == "device_update" and frame["device_id"] == "living_room_light"
    await ws.close()
