"""The IoT service's answers and frames fit the documents it serves: each JSON answer of a real
call against its OpenAPI document (tests/system/test_openapi_documents.py's Conformance), each
WebSocket frame against its AsyncAPI document."""
from __future__ import annotations

import asyncio

from tests.ai_core.conftest import access_token
from tests.iot.conftest import ALICE, SERVICE
from tests.support.asyncapi import FrameChecker, validate_document
from tests.system.test_openapi_documents import Conformance, check

ONE = "/api/v1/devices/{device_id}"


async def test_every_answer_and_frame_fits_the_documents(make_iot_service):
    service = await make_iot_service({"tick_seconds": 3600, "allow_remote_unlock": False})
    document = await (await service.get("/api/v1/openapi.json")).json()
    check(document)
    api = Conformance(service, document)
    asyncapi = await (await service.get("/api/v1/asyncapi.json")).json()
    validate_document(asyncapi)
    frames = FrameChecker(asyncapi)
    ws = await service.ws_connect(f"/api/v1/devices/ws?token={access_token('user_alice', 'alice')}")

    await api.call("GET", "/api/v1/devices", headers=ALICE)
    await api.call("GET", "/api/v1/devices", headers=SERVICE, params={"user_id": "user_alice", "room": "bedroom"})
    await api.call("GET", "/api/v1/devices", headers=SERVICE)  # 400: no user_id
    await api.call("GET", "/api/v1/devices", headers=ALICE, params={"user_id": "user_bob"})  # 403
    await api.call("GET", "/api/v1/devices")  # 401
    await api.call("GET", "/api/v1/devices/bedroom_ac", ONE, headers=ALICE)
    await api.call("GET", "/api/v1/devices/nothing", ONE, headers=ALICE)  # 404
    status, _ = await api.call("POST", "/api/v1/devices/bedroom_ac/operate", ONE + "/operate", headers=ALICE,
                               json={"action": "set", "properties": {"on": True, "target_temperature": 23.5}})
    assert status == 200
    status, _ = await api.call("POST", "/api/v1/devices/bedroom_ac/operate", ONE + "/operate", headers=ALICE,
                               json={"action": "set", "property": "mode", "value": "turbo"})
    assert status == 400
    status, _ = await api.call("POST", "/api/v1/devices/front_door_lock/operate", ONE + "/operate", headers=ALICE,
                               json={"action": "switch", "value": False})
    assert status == 403
    status, page = await api.call("GET", "/api/v1/devices/front_door_lock/history", ONE + "/history",
                                  headers=ALICE, params={"limit": "5"})
    assert status == 200 and page["total"] == 1
    await api.call("GET", "/api/v1/devices/bedroom_ac/history", ONE + "/history", headers=ALICE)

    await ws.send_json({"type": "ping"})
    for _ in range(2):  # the AC's update, then the pong
        frames.check((await asyncio.wait_for(ws.receive(), 5)).json())
    assert set(frames.seen) == {"device_update", "pong"}
    await ws.close()
