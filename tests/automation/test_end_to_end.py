"""The issue's "done means": a rule "when the living-room temperature goes above 28 °C, switch
the living-room AC on and tell me", working end to end with the simulated home of the real IoT
service, two gateway instances sharing Redis, and the person's phone on the other instance.

The living room's temperature is its air conditioner's own thermometer
(`living_room_ac.temperature`, docs/iot.md). The test warms the room the way a person could
— the AC heating towards 30 °C while the simulation ticks fast — and nothing is patched; the
rule then switches the AC to cooling."""
from __future__ import annotations

import asyncio

from tests.automation.conftest import API, feed_followed, frames_until, of_type


def token_of(headers: dict) -> str:
    return headers["Authorization"].split(" ", 1)[1]


async def test_too_warm_switches_the_living_room_ac_on_and_tells_me(make_stack, redis_url, bus_prefix):
    stack = await make_stack(instances=2, tick_seconds=0.1,
                             shared={"bus.redis_url": redis_url, "bus.prefix": bus_prefix})
    first, second = stack.gateways
    response = await first.client.post(f"{API}/rules", headers=first.alice, json={
        "name": "Too warm", "trigger_type": "device_state",
        "trigger_config": {"device_id": "living_room_ac", "property": "temperature", "above": 28},
        "actions": [{"type": "device", "device_id": "living_room_ac", "action": "set",
                     "properties": {"on": True, "mode": "cool", "target_temperature": 25}},
                    {"type": "notify", "title": "It is above 28 °C in the living room",
                     "body": "It is {{to}} °C: I switched the living-room AC on ({{rule}})."}]})
    assert response.status == 201, await response.text()
    rule = (await response.json())["rule"]
    await feed_followed(stack)
    async with second.client.ws_connect(f"/ws/chat?token={token_of(second.alice)}&session_id=phone") as phone:
        ac = await (await first.client.get("/api/v1/devices/living_room_ac", headers=first.alice)).json()
        assert ac["device"]["state"]["temperature"] < 28
        response = await first.client.post("/api/v1/devices/living_room_ac/operate", headers=first.alice, json={
            "action": "set", "properties": {"on": True, "mode": "heat", "target_temperature": 30}})
        assert response.status == 200, await response.text()
        frames = await frames_until(phone, "notification", 1, timeout=30)
    [notification] = of_type(frames, "notification")
    assert notification["notification"]["title"] == "It is above 28 °C in the living room"
    assert notification["notification"]["data"] == {"source": f"automation:{rule['id']}"}
    readings = [frame["device"]["state"]["temperature"] for frame in of_type(frames, "device_update")
                if frame["device_id"] == "living_room_ac"]
    assert readings and max(readings) > 28

    ac = await (await second.client.get("/api/v1/devices/living_room_ac", headers=second.alice)).json()
    assert ac["device"]["state"]["on"] is True and ac["device"]["state"]["mode"] == "cool"
    assert ac["device"]["state"]["target_temperature"] == 25
    history = await (await second.client.get("/api/v1/devices/living_room_ac/history", headers=second.alice)).json()
    assert [operation["source"] for operation in history["operations"]] == [f"automation:{rule['id']}", "api"]

    # The room keeps changing for a while: still one run, on one of the two instances.
    await asyncio.sleep(1.0)
    runs = [run for run in await second.runs(second.alice, rule["id"]) if run["status"] != "running"]
    assert len(runs) == 1, runs
    run = runs[0]
    assert run["trigger"] == "device_state" and run["status"] == "succeeded"
    assert run["trigger_detail"]["from"] <= 28 < run["trigger_detail"]["to"]
    assert run["trigger_detail"]["cause"] == "simulation"
    assert [result["type"] for result in run["results"]] == ["device", "notify"]
    assert notification["notification"]["body"] == (
        f"It is {run['trigger_detail']['to']} °C: I switched the living-room AC on (Too warm).")
    # Bob's home was not touched.
    bob_ac = await (await first.client.get("/api/v1/devices/living_room_ac", headers=first.bob)).json()
    assert bob_ac["device"]["state"]["on"] is False
