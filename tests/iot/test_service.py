"""The IoT service's REST API on real PostgreSQL: each person's simulated home, who may act for
whom, operations and every kind of invalid one, the lock refused by the configuration, and the
operation history, paged and kept across a restart of the service."""
from __future__ import annotations

import pytest

from tests.iot.conftest import ADMIN, ALICE, BOB, SERVICE, device, operate

SIMULATED = ["bedroom_light", "bedroom_ac", "bedroom_temperature", "bedroom_humidity", "living_room_light",
             "living_room_ac", "living_room_curtain", "front_door_lock"]


async def test_each_person_gets_the_eight_simulated_devices_on_first_use(iot_service):
    response = await iot_service.get("/api/v1/devices", headers=ALICE)
    body = await response.json()
    assert response.status == 200 and body["count"] == 8
    assert [d["id"] for d in body["devices"]] == SIMULATED
    light = body["devices"][4]
    assert light == {
        "id": "living_room_light", "name": "Living room light", "names": {"en": "Living room light", "zh": "客厅灯"},
        "room": "living_room", "room_names": {"en": "Living room", "zh": "客厅"}, "type": "light",
        "adapter": "simulation", "online": True, "state": {"on": False, "brightness": 80, "color_temp": 4000},
        "properties": {"on": {"type": "bool", "writable": True},
                       "brightness": {"type": "int", "min": 0, "max": 100, "unit": "%", "writable": True},
                       "color_temp": {"type": "int", "min": 2700, "max": 6500, "unit": "K", "writable": True}},
        "updated_at": light["updated_at"]}
    assert light["updated_at"].endswith("Z") and len(light["updated_at"]) == 24
    ac = body["devices"][1]
    assert ac["type"] == "air_conditioner" and ac["names"]["zh"] == "卧室空调"
    assert ac["properties"]["mode"]["options"] == ["cool", "heat", "fan", "dry", "auto"]
    assert ac["properties"]["target_temperature"] == {"type": "number", "min": 16, "max": 30, "step": 0.5,
                                                      "unit": "°C", "writable": True}
    assert body["devices"][2]["properties"]["temperature"]["writable"] is False
    assert body["devices"][7]["state"] == {"locked": True}

    rooms = await (await iot_service.get("/api/v1/devices", headers=ALICE, params={"room": "bedroom"})).json()
    assert [d["id"] for d in rooms["devices"]] == SIMULATED[:4] and rooms["count"] == 4
    lights = await (await iot_service.get("/api/v1/devices", headers=ALICE, params={"type": "light"})).json()
    assert [d["id"] for d in lights["devices"]] == ["bedroom_light", "living_room_light"]
    none = await (await iot_service.get("/api/v1/devices", headers=ALICE, params={"room": "attic"})).json()
    assert none == {"devices": [], "count": 0}

    assert (await device(iot_service, "front_door_lock"))["type"] == "lock"
    response = await iot_service.get("/api/v1/devices/garage_door", headers=ALICE)
    assert response.status == 404 and (await response.json())["errorType"] == "device_not_found"


async def test_operations_switch_and_set_and_each_home_is_its_own(iot_service):
    answer = await operate(iot_service, "living_room_light", {"action": "switch", "value": True, "source": "console"})
    assert answer["success"] is True and answer["device"]["state"]["on"] is True
    operation = answer["operation"]
    assert {key: operation[key] for key in ("device_id", "user_id", "action", "changes", "source", "actor",
                                            "success", "error")} == {
        "device_id": "living_room_light", "user_id": "user_alice", "action": "switch",
        "changes": {"on": {"from": False, "to": True}}, "source": "console", "actor": "user_alice",
        "success": True, "error": None}
    assert len(operation["id"]) == 32 and operation["created_at"].endswith("Z")

    answer = await operate(iot_service, "living_room_light", {"action": "set", "property": "brightness", "value": 40.0})
    assert answer["device"]["state"] == {"on": True, "brightness": 40, "color_temp": 4000}
    assert answer["operation"]["changes"] == {"brightness": {"from": 80, "to": 40}}
    assert answer["operation"]["source"] == "api"

    answer = await operate(iot_service, "bedroom_ac", {"action": "set", "properties": {
        "on": True, "mode": "heat", "target_temperature": 22.5, "fan": "high"}})
    assert answer["device"]["state"] == {"on": True, "mode": "heat", "target_temperature": 22.5, "fan": "high",
                                         "temperature": 26.5}
    answer = await operate(iot_service, "living_room_curtain", {"action": "set", "property": "position", "value": 50})
    assert answer["device"]["state"] == {"position": 50}
    answer = await operate(iot_service, "front_door_lock", {"action": "switch", "value": False})
    assert answer["device"]["state"] == {"locked": False}
    # The same value again: a successful operation that changes nothing.
    answer = await operate(iot_service, "front_door_lock", {"action": "switch", "value": False})
    assert answer["operation"]["changes"] == {} and answer["operation"]["success"] is True

    # Bob's home is untouched; the service acts for whoever it names, the administrator too.
    assert (await device(iot_service, "living_room_light", BOB))["state"]["on"] is False
    assert (await device(iot_service, "living_room_light", SERVICE, user_id="user_alice"))["state"]["on"] is True
    answer = await operate(iot_service, "bedroom_light", {"action": "switch", "value": True, "source": "assistant"},
                           SERVICE, user_id="user_bob")
    assert answer["operation"]["actor"] == "service" and answer["operation"]["user_id"] == "user_bob"
    assert (await device(iot_service, "bedroom_light", BOB))["state"]["on"] is True
    assert (await device(iot_service, "bedroom_light", ADMIN, user_id="user_bob"))["state"]["on"] is True
    assert (await device(iot_service, "bedroom_light", ADMIN))["state"]["on"] is False  # the admin's own home


async def test_who_may_call(iot_service):
    response = await iot_service.get("/api/v1/devices")
    assert response.status == 401 and (await response.json())["errorType"] == "unauthorized"
    response = await iot_service.get("/api/v1/devices", headers={"Authorization": "Bearer nonsense"})
    assert response.status == 401
    response = await iot_service.get("/api/v1/devices", headers=ALICE, params={"user_id": "user_bob"})
    assert response.status == 403 and (await response.json())["errorType"] == "forbidden"
    response = await iot_service.post("/api/v1/devices/bedroom_light/operate", headers=BOB,
                                      params={"user_id": "user_alice"}, json={"action": "switch", "value": True})
    assert response.status == 403
    response = await iot_service.get("/api/v1/devices/bedroom_light/history", headers=BOB,
                                     params={"user_id": "user_alice"})
    assert response.status == 403
    response = await iot_service.get("/api/v1/devices", headers=ALICE, params={"user_id": "user_alice"})
    assert response.status == 200
    assert (await device(iot_service, "bedroom_light", ALICE))["state"]["on"] is False  # nobody touched it


async def test_the_service_credential_without_user_id_acts_on_the_administrators_home(iot_service):
    """The console's IoT panel calls the service bare (spec/console.md: one set of eight devices)."""
    response = await iot_service.get("/api/v1/devices", headers=SERVICE)
    body = await response.json()
    assert response.status == 200, body
    assert [d["id"] for d in body["devices"]] == SIMULATED and body["count"] == 8
    answer = await operate(iot_service, "living_room_light", {"action": "switch", "value": True}, SERVICE)
    assert answer["operation"]["user_id"] == "admin"
    assert (await device(iot_service, "living_room_light", SERVICE))["state"]["on"] is True
    assert (await device(iot_service, "living_room_light", ADMIN))["state"]["on"] is True
    page = await (await iot_service.get("/api/v1/devices/living_room_light/history", headers=SERVICE)).json()
    assert page["total"] == 1 and page["operations"][0]["user_id"] == "admin"

    # Naming someone still acts for them; a person still sees only their own home.
    assert (await device(iot_service, "living_room_light", SERVICE, user_id="user_alice"))["state"]["on"] is False
    await operate(iot_service, "bedroom_light", {"action": "switch", "value": True}, SERVICE, user_id="user_alice")
    alices = await (await iot_service.get("/api/v1/devices", headers=ALICE)).json()
    assert {d["id"]: d["state"].get("on") for d in alices["devices"]}["living_room_light"] is False
    assert {d["id"]: d["state"].get("on") for d in alices["devices"]}["bedroom_light"] is True
    assert (await device(iot_service, "bedroom_light", SERVICE))["state"]["on"] is False  # the admin's untouched
    response = await iot_service.get("/api/v1/devices", headers=ALICE, params={"user_id": "admin"})
    assert response.status == 403


async def invalid(client, device_id: str, body: dict, *needles: str) -> str:
    response = await client.post(f"/api/v1/devices/{device_id}/operate", headers=ALICE, json=body)
    answer = await response.json()
    assert response.status == 400 and answer["errorType"] == "invalid_operation", answer
    assert answer.get("hint")
    for needle in needles:
        assert needle in answer["error"], (needle, answer["error"])
    return answer["error"]


async def test_every_invalid_operation_is_a_400_naming_the_property_and_its_range(iot_service):
    light, ac = "living_room_light", "bedroom_ac"
    await invalid(iot_service, light, {"action": "set", "property": "brightness", "value": 140},
                  "brightness", "out of range", "from 0 to 100 %")
    await invalid(iot_service, light, {"action": "set", "property": "brightness", "value": -1}, "from 0 to 100")
    await invalid(iot_service, light, {"action": "set", "property": "brightness", "value": 40.5},
                  "brightness", "an integer from 0 to 100")
    await invalid(iot_service, light, {"action": "set", "property": "brightness", "value": "40"}, "brightness")
    await invalid(iot_service, light, {"action": "set", "property": "color_temp", "value": 1000}, "2700 to 6500 K")
    await invalid(iot_service, light, {"action": "set", "property": "on", "value": 1}, "on", "true or false")
    await invalid(iot_service, light, {"action": "switch", "value": "yes"}, "on", "true or false")
    await invalid(iot_service, light, {"action": "switch"}, "value")
    await invalid(iot_service, light, {"action": "set", "property": "colour", "value": "red"},
                  "no property 'colour'", "on (true or false)", "brightness (an integer from 0 to 100 %)",
                  "color_temp")
    await invalid(iot_service, light, {"action": "dim", "value": 3}, "Unknown action 'dim'", "switch", "set")
    await invalid(iot_service, light, {"action": "set"}, "property", "properties")
    await invalid(iot_service, light, {"action": "set", "property": "on", "properties": {"on": True}}, "either")
    await invalid(iot_service, light, {"action": "set", "properties": {}}, "at least one")
    await invalid(iot_service, ac, {"action": "set", "property": "mode", "value": "turbo"},
                  "mode", "one of cool, heat, fan, dry, auto")
    await invalid(iot_service, ac, {"action": "set", "property": "fan", "value": "max"}, "auto, low, medium, high")
    await invalid(iot_service, ac, {"action": "set", "property": "target_temperature", "value": 31},
                  "target_temperature", "from 16 to 30 °C")
    await invalid(iot_service, ac, {"action": "set", "property": "target_temperature", "value": 24.3},
                  "multiple of 0.5")
    await invalid(iot_service, ac, {"action": "set", "properties": {"on": True, "target_temperature": 40}},
                  "target_temperature")
    await invalid(iot_service, "bedroom_temperature", {"action": "set", "property": "temperature", "value": 20},
                  "temperature", "read-only")
    await invalid(iot_service, "bedroom_humidity", {"action": "switch", "value": True}, "cannot be switched",
                  "none (it only reports)")
    await invalid(iot_service, "living_room_curtain", {"action": "switch", "value": True},
                  "position (an integer from 0 to 100 %)")
    await invalid(iot_service, "front_door_lock", {"action": "set", "property": "locked", "value": "no"}, "locked")

    # All or nothing: the AC is as it was, and no invalid operation entered the history.
    assert (await device(iot_service, ac))["state"] == {"on": False, "mode": "cool", "target_temperature": 26,
                                                        "fan": "auto", "temperature": 26.5}
    page = await (await iot_service.get(f"/api/v1/devices/{ac}/history", headers=ALICE)).json()
    assert page == {"operations": [], "count": 0, "total": 0}

    for body in ({"value": True}, {"action": "switch", "value": True, "source": ""}, {"action": 3},
                 {"action": "switch", "value": True, "colour": "red"}):
        response = await iot_service.post(f"/api/v1/devices/{light}/operate", headers=ALICE, json=body)
        assert response.status == 400 and (await response.json())["errorType"] == "validation_error", body
    response = await iot_service.post(f"/api/v1/devices/{light}/operate", headers=ALICE, data=b"{not json")
    assert response.status == 400
    response = await iot_service.post("/api/v1/devices/no_such/operate", headers=ALICE,
                                      json={"action": "switch", "value": True})
    assert response.status == 404 and (await response.json())["errorType"] == "device_not_found"


HUGE = "1" + "0" * 309  # 10**309 written out: JSON reads it as an int no float holds


@pytest.mark.parametrize("body", [
    f'{{"action": "set", "property": "brightness", "value": {HUGE}}}',
    f'{{"action": "set", "properties": {{"brightness": {HUGE}}}}}',
    '{"action": "set", "property": "brightness", "value": 1e309}',
    '{"action": "set", "property": "brightness", "value": -1e309}',
])
async def test_a_number_no_float_holds_is_a_400(iot_service, body):
    """`math.isfinite` of the 310-digit integer raised OverflowError: a 500."""
    response = await iot_service.post("/api/v1/devices/living_room_light/operate", data=body,
                                      headers={**ALICE, "Content-Type": "application/json"})
    answer = await response.json()
    assert response.status == 400 and answer["errorType"] == "validation_error", answer
    assert "finite" in answer["error"]


async def test_unlocking_refused_by_the_configuration_is_a_403_recorded_as_failed(make_iot_service):
    service = await make_iot_service({"allow_remote_unlock": False, "tick_seconds": 3600})
    response = await service.post("/api/v1/devices/front_door_lock/operate", headers=ALICE,
                                  json={"action": "switch", "value": False, "source": "assistant"})
    answer = await response.json()
    assert response.status == 403 and answer["errorType"] == "operation_refused"
    assert "front_door_lock" in answer["error"] and "allow_remote_unlock" in answer["hint"]
    assert (await device(service, "front_door_lock"))["state"] == {"locked": True}
    page = await (await service.get("/api/v1/devices/front_door_lock/history", headers=ALICE)).json()
    assert page["total"] == 1
    failed = page["operations"][0]
    assert (failed["success"], failed["source"], failed["changes"]) == (
        False, "assistant", {"locked": {"from": True, "to": False}})
    assert "refused" in failed["error"]
    # Locking stays allowed.
    answer = await operate(service, "front_door_lock", {"action": "set", "property": "locked", "value": True})
    assert answer["success"] is True


async def test_history_is_paged_newest_first_and_survives_a_restart(make_iot_service, aiohttp_client):
    first = await make_iot_service({"tick_seconds": 3600})
    for brightness in (10, 20, 30, 40, 50):
        await operate(first, "bedroom_light", {"action": "set", "property": "brightness", "value": brightness})
    page = await (await first.get("/api/v1/devices/bedroom_light/history", headers=ALICE,
                                  params={"limit": "2"})).json()
    assert (page["count"], page["total"]) == (2, 5)
    assert [op["changes"]["brightness"]["to"] for op in page["operations"]] == [50, 40]
    page = await (await first.get("/api/v1/devices/bedroom_light/history", headers=ALICE,
                                  params={"limit": "2", "offset": "4"})).json()
    assert [op["changes"]["brightness"] for op in page["operations"]] == [{"from": 60, "to": 10}]
    for query in ({"limit": "0"}, {"limit": "201"}, {"offset": "-1"}, {"limit": "x"}):
        response = await first.get("/api/v1/devices/bedroom_light/history", headers=ALICE, params=query)
        assert response.status == 400 and (await response.json())["errorType"] == "validation_error"
    response = await first.get("/api/v1/devices/no_such_device/history", headers=ALICE)
    assert response.status == 404 and (await response.json())["errorType"] == "device_not_found"
    await first.close()

    # The service stopped; another one on the same database has the state and the history.
    second = await make_iot_service({"tick_seconds": 3600})
    assert (await device(second, "bedroom_light"))["state"]["brightness"] == 50
    page = await (await second.get("/api/v1/devices/bedroom_light/history", headers=SERVICE,
                                   params={"user_id": "user_alice"})).json()
    assert page["total"] == 5 and page["operations"][0]["changes"]["brightness"] == {"from": 40, "to": 50}
    assert (await (await second.get("/api/v1/devices/bedroom_light/history", headers=BOB)).json())["total"] == 0
