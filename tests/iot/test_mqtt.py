"""The MQTT adapter against the real Mosquitto broker (MQTT_TEST_URL, default 127.0.0.1:1883): a
test client announces devices by Home Assistant discovery; the adapter lists them for the
configured owner, mirrors their state messages (state and WebSocket), publishes operations on
their command topics, and removes a device announced with an empty config. Each test has its
own discovery prefix. Without a broker these tests are skipped with one line saying so."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import uuid
from urllib.parse import urlsplit

import aiohttp
import aiomqtt
import pytest

from plugins.iot.service import SERVICE
from tests.ai_core.conftest import access_token
from tests.iot.conftest import ADMIN, ALICE
from tests.support.servers import free_port

BROKER = urlsplit(os.environ.get("MQTT_TEST_URL") or os.environ.get("MQTT_URL") or "mqtt://127.0.0.1:1883")
HOST, PORT = BROKER.hostname or "127.0.0.1", BROKER.port or 1883
SKIP_LINE = "no MQTT broker at 127.0.0.1:1883 (MQTT_TEST_URL); MQTT adapter tests skipped"


def broker_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def broker() -> tuple[str, int]:
    if not broker_answers(HOST, PORT):
        pytest.skip(SKIP_LINE if (HOST, PORT) == ("127.0.0.1", 1883)
                    else f"no MQTT broker at {HOST}:{PORT} (MQTT_TEST_URL); MQTT adapter tests skipped")
    return HOST, PORT


@pytest.fixture
def prefix() -> str:
    return f"hatest_{uuid.uuid4().hex[:12]}"


def mqtt_settings(host: str, port: int, prefix: str, **more) -> dict:
    return {"adapters": ["simulation", "mqtt"], "tick_seconds": 3600, "mqtt_host": host, "mqtt_port": port,
            "mqtt_discovery_prefix": prefix, "mqtt_reconnect_seconds": 0.2, **more}


async def eventually(check, timeout: float = 10.0, interval: float = 0.05):
    """`await check()` until it returns something true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(interval)


async def devices_of(client, headers=ADMIN, **query) -> dict[str, dict]:
    response = await client.get("/api/v1/devices", headers=headers, params=query)
    assert response.status == 200, await response.text()
    return {device["id"]: device for device in (await response.json())["devices"]}


async def frame_where(ws, timeout: float = 10.0, **expected) -> dict:
    async def read() -> dict:
        while True:
            message = await ws.receive()
            assert message.type == aiohttp.WSMsgType.TEXT, message
            frame = message.json()
            if all(frame.get(key) == value for key, value in expected.items()):
                return frame
    return await asyncio.wait_for(read(), timeout)


async def test_devices_announced_by_discovery_are_listed_mirrored_commanded_and_removed(
        broker, prefix, make_iot_service):
    host, port = broker
    base = f"{prefix}-devices"
    light_config = f"{prefix}/light/desk_lamp/config"
    sensor_config = f"{prefix}/sensor/study_node/temperature/config"
    async with aiomqtt.Client(host, port, identifier=f"test-{uuid.uuid4().hex[:8]}") as device:
        # Announced before the service starts, retained: as a real device does.
        await device.publish(light_config, json.dumps({
            "name": "Desk lamp", "unique_id": "desk-lamp-1", "state_topic": f"{base}/desk/state",
            "command_topic": f"{base}/desk/set", "brightness_state_topic": f"{base}/desk/brightness",
            "brightness_command_topic": f"{base}/desk/brightness/set",
            "device": {"identifiers": ["desk-1"], "name": "Desk lamp", "suggested_area": "Study"}}), retain=True)
        service = await make_iot_service(mqtt_settings(host, port, prefix))
        try:
            listed = await eventually(lambda: _has(service, "desk_lamp"))
            lamp = listed["desk_lamp"]
            assert (lamp["type"], lamp["adapter"], lamp["online"], lamp["room"]) == ("light", "mqtt", True, "study")
            assert lamp["name"] == "Desk lamp" and lamp["room_names"]["en"] == "Study"
            assert lamp["properties"] == {"on": {"type": "bool", "writable": True},
                                          "brightness": {"type": "int", "min": 0, "max": 100, "unit": "%",
                                                         "writable": True}}
            assert "bedroom_light" in listed  # the owner's simulated home is there too
            assert "desk_lamp" not in await devices_of(service, ALICE)  # the devices are the admin's

            # Announced while the service runs, in Home Assistant's abbreviated form.
            await device.publish(sensor_config, json.dumps({
                "~": f"{base}/study", "name": "Study temperature", "dev_cla": "temperature",
                "unit_of_meas": "°C", "stat_t": "~/state", "val_tpl": "{{ value_json.temperature | float }}",
                "json_attr_t": "~/state"}),
                retain=True)
            listed = await eventually(lambda: _has(service, "study_node_temperature"))
            sensor = listed["study_node_temperature"]
            assert sensor["type"] == "temperature_sensor"
            assert sensor["properties"] == {"temperature": {"type": "number", "unit": "°C", "writable": False}}

            ws = await service.ws_connect(f"/api/v1/devices/ws?token={access_token('admin', 'admin', admin=True)}")
            await device.publish(f"{base}/desk/state", "ON")
            frame = await frame_where(ws, device_id="desk_lamp", cause="mqtt")
            assert frame["changes"] == {"on": {"from": None, "to": True}} and frame["user_id"] == "admin"
            await device.publish(f"{base}/desk/brightness", "128")
            frame = await frame_where(ws, device_id="desk_lamp", cause="mqtt")
            assert frame["device"]["state"] == {"on": True, "brightness": 50}
            await device.publish(f"{base}/study/state", json.dumps({"temperature": 21.5, "battery": 90}))
            frame = await frame_where(ws, device_id="study_node_temperature", cause="mqtt", operation_id=None)
            while "temperature" not in frame["changes"]:  # the description grows by the new attribute first
                frame = await frame_where(ws, device_id="study_node_temperature")
            assert frame["changes"] == {"temperature": {"from": None, "to": 21.5}, "battery": {"from": None, "to": 90}}
            sensor = (await devices_of(service))["study_node_temperature"]
            assert sensor["state"] == {"temperature": 21.5, "battery": 90}
            assert sensor["properties"]["battery"] == {"type": "number", "writable": False,
                                                      "description": "an attribute the device reports"}

            # An operation is published on the command topics; the state follows the device's report.
            await device.subscribe(f"{base}/desk/#")
            response = await service.post("/api/v1/devices/desk_lamp/operate", headers=ADMIN,
                                          json={"action": "set", "properties": {"on": False, "brightness": 20}})
            answer = await response.json()
            assert response.status == 200 and answer["success"] is True, answer
            assert answer["operation"]["changes"] == {"on": {"from": True, "to": False},
                                                      "brightness": {"from": 50, "to": 20}}
            commands = await _commands(device, {f"{base}/desk/set", f"{base}/desk/brightness/set"}, 2)
            assert commands == {f"{base}/desk/set": "OFF", f"{base}/desk/brightness/set": "51"}
            await device.publish(f"{base}/desk/state", "OFF")
            frame = await frame_where(ws, device_id="desk_lamp", cause="mqtt")
            assert frame["changes"] == {"on": {"from": True, "to": False}}
            history = await (await service.get("/api/v1/devices/desk_lamp/history", headers=ADMIN)).json()
            assert history["total"] == 1 and history["operations"][0]["success"] is True

            response = await service.post("/api/v1/devices/study_node_temperature/operate", headers=ADMIN,
                                          json={"action": "set", "property": "temperature", "value": 30})
            assert response.status == 400 and "read-only" in (await response.json())["error"]

            # An empty config removes the device.
            await device.publish(light_config, b"", retain=True)
            frame = await frame_where(ws, type="device_removed", device_id="desk_lamp")
            assert frame["user_id"] == "admin"
            assert "desk_lamp" not in await devices_of(service)
            response = await service.get("/api/v1/devices/desk_lamp", headers=ADMIN)
            assert response.status == 404
            await ws.close()
        finally:
            await device.publish(light_config, b"", retain=True)
            await device.publish(sensor_config, b"", retain=True)


async def _has(service, device_id: str) -> dict | None:
    listed = await devices_of(service)
    return listed if device_id in listed else None


async def _commands(client: aiomqtt.Client, topics: set[str], count: int) -> dict[str, str]:
    seen: dict[str, str] = {}

    async def read() -> None:
        async for message in client.messages:
            if message.topic.value in topics:
                seen[message.topic.value] = bytes(message.payload).decode()
                if len(seen) >= count:
                    return
    await asyncio.wait_for(read(), 10)
    return seen


async def test_a_lock_climate_and_cover_are_mapped_and_commanded(broker, prefix, make_iot_service):
    host, port = broker
    base = f"{prefix}-devices"
    configs = {
        f"{prefix}/lock/door/config": {"name": "Garden door", "command_topic": f"{base}/door/set",
                                        "state_topic": f"{base}/door/state", "avty_t": f"{base}/door/available"},
        f"{prefix}/climate/office_ac/config": {
            "name": "Office AC", "mode_command_topic": f"{base}/ac/mode/set", "mode_state_topic": f"{base}/ac/mode",
            "modes": ["off", "cool", "heat", "fan_only"], "temperature_command_topic": f"{base}/ac/temp/set",
            "min_temp": 16, "max_temp": 30, "temp_step": 0.5, "current_temperature_topic": f"{base}/ac/current"},
        f"{prefix}/cover/blind/config": {"name": "Office blind", "set_position_topic": f"{base}/blind/set",
                                         "position_topic": f"{base}/blind/position"},
    }
    async with aiomqtt.Client(host, port, identifier=f"test-{uuid.uuid4().hex[:8]}") as device:
        for topic, config in configs.items():
            await device.publish(topic, json.dumps(config), retain=True)
        service = await make_iot_service(mqtt_settings(host, port, prefix, allow_remote_unlock=False))
        try:
            listed = await eventually(lambda: _all(service, {"door", "office_ac", "blind"}))
            assert listed["door"]["type"] == "lock"
            ac = listed["office_ac"]
            assert ac["type"] == "air_conditioner"
            assert ac["properties"]["mode"] == {"type": "enum", "options": ["cool", "heat", "fan"], "writable": True}
            assert ac["properties"]["target_temperature"] == {"type": "number", "min": 16, "max": 30, "step": 0.5,
                                                              "unit": "°C", "writable": True}
            assert ac["properties"]["temperature"]["writable"] is False
            assert listed["blind"]["type"] == "curtain"

            assert listed["door"]["online"] is False  # until it says it is available
            await device.publish(f"{base}/door/available", "online")
            await device.publish(f"{base}/door/state", "LOCKED")
            await device.publish(f"{base}/ac/mode", "off")
            await eventually(lambda: _state_is(service, "door", {"locked": True}))
            await eventually(lambda: _online_is(service, "door", True))
            # Announced again (a device restarting): it stays as available as it said it was.
            await device.publish(f"{prefix}/lock/door/config", json.dumps({**configs[f"{prefix}/lock/door/config"],
                                                                            "name": "Garden gate"}), retain=True)
            await eventually(lambda: _name_is(service, "door", "Garden gate"))
            assert (await devices_of(service))["door"]["online"] is True
            await device.subscribe(f"{base}/#")
            response = await service.post("/api/v1/devices/door/operate", headers=ADMIN,
                                          json={"action": "switch", "value": False})
            assert response.status == 403 and (await response.json())["errorType"] == "operation_refused"

            response = await service.post("/api/v1/devices/office_ac/operate", headers=ADMIN, json={
                "action": "set", "properties": {"on": True, "mode": "fan", "target_temperature": 22.5}})
            assert response.status == 200, await response.text()
            commands = await _commands(device, {f"{base}/ac/mode/set", f"{base}/ac/temp/set"}, 2)
            assert commands == {f"{base}/ac/mode/set": "fan_only", f"{base}/ac/temp/set": "22.5"}
            # No state topic for the target temperature: it is taken as set at once (optimistic).
            assert (await response.json())["device"]["state"]["target_temperature"] == 22.5
            response = await service.post("/api/v1/devices/office_ac/operate", headers=ADMIN, json={
                "action": "set", "property": "target_temperature", "value": 35})
            assert response.status == 400 and "from 16 to 30 °C" in (await response.json())["error"]

            response = await service.post("/api/v1/devices/blind/operate", headers=ADMIN,
                                          json={"action": "set", "property": "position", "value": 40})
            assert response.status == 200
            assert await _commands(device, {f"{base}/blind/set"}, 1) == {f"{base}/blind/set": "40"}

            await device.publish(f"{base}/door/available", "offline")
            await eventually(lambda: _online_is(service, "door", False))
            response = await service.post("/api/v1/devices/door/operate", headers=ADMIN,
                                          json={"action": "switch", "value": True})
            assert response.status == 200  # already locked: nothing to send, nothing refused
            await device.publish(f"{base}/door/state", "UNLOCKED")
            await eventually(lambda: _state_is(service, "door", {"locked": False}))
            response = await service.post("/api/v1/devices/door/operate", headers=ADMIN,
                                          json={"action": "switch", "value": True})
            assert response.status == 503 and (await response.json())["errorType"] == "device_unreachable"
        finally:
            for topic in configs:
                await device.publish(topic, b"", retain=True)


async def _all(service, ids: set[str]) -> dict | None:
    listed = await devices_of(service)
    return listed if ids <= set(listed) else None


async def _name_is(service, device_id: str, name: str) -> bool:
    return (await devices_of(service))[device_id]["name"] == name


async def _state_is(service, device_id: str, state: dict) -> bool:
    return (await devices_of(service))[device_id]["state"] == state


@pytest.mark.skipif(shutil.which("mosquitto") is None and not os.path.exists("/usr/sbin/mosquitto"),
                    reason="no mosquitto binary to start a broker of its own; the reconnection test skipped")
async def test_the_adapter_reconnects_when_the_broker_comes_back(prefix, make_iot_service, tmp_path):
    """A broker of the test's own (a mosquitto process on a free port), stopped and started again."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    port = free_port()
    (tmp_path / "mosquitto.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                                             f"persistence true\npersistence_location {tmp_path}/\n")

    def start() -> subprocess.Popen:
        return subprocess.Popen([binary, "-c", str(tmp_path / "mosquitto.conf")], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    broker_process = start()
    try:
        await eventually(lambda: asyncio.to_thread(broker_answers, "127.0.0.1", port))
        config_topic = f"{prefix}/switch/fan/config"
        async with aiomqtt.Client("127.0.0.1", port) as device:
            await device.publish(config_topic, json.dumps({"name": "Fan", "command_topic": f"{prefix}-fan/set"}),
                                 retain=True)
        service = await make_iot_service(mqtt_settings("127.0.0.1", port, prefix))
        fan = await eventually(lambda: _has(service, "fan"))
        assert fan["fan"]["online"] is True and fan["fan"]["type"] == "switch"

        broker_process.terminate()
        broker_process.wait(10)
        await eventually(lambda: _online_is(service, "fan", False))
        response = await service.post("/api/v1/devices/fan/operate", headers=ADMIN,
                                      json={"action": "switch", "value": True})
        answer = await response.json()
        assert response.status == 503 and answer["errorType"] == "device_unreachable", answer
        history = await (await service.get("/api/v1/devices/fan/history", headers=ADMIN)).json()
        assert history["operations"][0]["success"] is False

        broker_process = start()
        await eventually(lambda: _online_is(service, "fan", True), timeout=15)
        response = await service.post("/api/v1/devices/fan/operate", headers=ADMIN,
                                      json={"action": "switch", "value": True})
        assert response.status == 200
        # No state topic: the switch is taken as switched (optimistic, as Home Assistant does).
        assert (await response.json())["device"]["state"] == {"on": True}
    finally:
        broker_process.terminate()
        broker_process.wait(10)


async def _online_is(service, device_id: str, online: bool) -> bool:
    listed = await devices_of(service)
    return device_id in listed and listed[device_id]["online"] is online


async def test_device_based_discovery_announces_several_components_in_one_config(broker, prefix, make_iot_service):
    """Home Assistant's newer form: `<prefix>/device/<id>/config` with the components in `cmps`."""
    host, port = broker
    topic = f"{prefix}/device/kitchen_hub/config"
    base = f"{prefix}-kitchen"
    config = {"dev": {"ids": ["hub-1"], "name": "Kitchen hub", "sa": "Kitchen"}, "o": {"name": "test"},
              "~": base, "cmps": {
                  "ceiling": {"p": "light", "name": "Ceiling", "cmd_t": "~/ceiling/set", "stat_t": "~/ceiling"},
                  "air": {"p": "sensor", "dev_cla": "humidity", "unit_of_meas": "%", "stat_t": "~/air",
                          "val_tpl": "{{ value_json.humidity }}"},
                  "robot": {"p": "vacuum", "cmd_t": "~/robot"}}}
    async with aiomqtt.Client(host, port, identifier=f"test-{uuid.uuid4().hex[:8]}") as device:
        service = await make_iot_service(mqtt_settings(host, port, prefix))
        try:
            await eventually(lambda: _connected(service))
            await device.publish(topic, json.dumps(config), retain=True)
            listed = await eventually(lambda: _all(service, {"kitchen_hub_ceiling", "kitchen_hub_air"}))
            assert listed["kitchen_hub_ceiling"]["name"] == "Kitchen hub Ceiling"
            assert listed["kitchen_hub_ceiling"]["room"] == "kitchen"
            assert listed["kitchen_hub_air"]["type"] == "humidity_sensor"
            assert "kitchen_hub_robot" not in listed  # a platform this adapter does not read is left out
            await device.publish(f"{base}/air", json.dumps({"humidity": 48}))
            await eventually(lambda: _state_is(service, "kitchen_hub_air", {"humidity": 48}))

            # A component sent with its platform alone is removed; an empty config removes the rest.
            await device.publish(topic, json.dumps({**config, "cmps": {**config["cmps"], "air": {"p": "sensor"}}}),
                                 retain=True)
            await eventually(lambda: _gone(service, "kitchen_hub_air"))
            assert "kitchen_hub_ceiling" in await devices_of(service)
            await device.publish(topic, b"", retain=True)
            await eventually(lambda: _gone(service, "kitchen_hub_ceiling"))
        finally:
            await device.publish(topic, b"", retain=True)


async def _connected(service) -> bool:
    adapter = service.app[SERVICE].adapters["mqtt"]
    return adapter.connected.is_set()


async def _gone(service, device_id: str) -> bool:
    return device_id not in await devices_of(service)


async def test_a_device_announced_once_is_known_after_a_restart(broker, prefix, make_iot_service):
    """Not retained, so the broker will not send the config again: the service rebuilds the device
    from what it stored, subscribes to its topics again, and mirrors its state."""
    host, port = broker
    base = f"{prefix}-plug"
    async with aiomqtt.Client(host, port, identifier=f"test-{uuid.uuid4().hex[:8]}") as device:
        first = await make_iot_service(mqtt_settings(host, port, prefix))
        await eventually(lambda: _connected(first))
        await device.publish(f"{prefix}/switch/plug/config", json.dumps({
            "name": "Plug", "command_topic": f"{base}/set", "state_topic": f"{base}/state"}))
        await eventually(lambda: _has(first, "plug"))
        await first.close()

        second = await make_iot_service(mqtt_settings(host, port, prefix))
        plug = (await devices_of(second))["plug"]
        assert plug["type"] == "switch"
        await eventually(lambda: _connected(second))
        await eventually(lambda: _online_is(second, "plug", True))
        await device.publish(f"{base}/state", "ON")
        await eventually(lambda: _state_is(second, "plug", {"on": True}))
        await device.subscribe(f"{base}/set")
        response = await second.post("/api/v1/devices/plug/operate", headers=ADMIN,
                                     json={"action": "switch", "value": False})
        assert response.status == 200
        assert await _commands(device, {f"{base}/set"}, 1) == {f"{base}/set": "OFF"}
