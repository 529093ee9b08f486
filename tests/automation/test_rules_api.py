"""The Automation endpoints: rules and scenes, their checks, owners and errors."""
from __future__ import annotations

import re

from tests.automation.conftest import API

NOTIFY = {"type": "notify", "title": "Hello", "body": "from a rule"}


def rule_body(**changes) -> dict:
    return {"name": "Say hello", "trigger_type": "manual", "actions": [NOTIFY], **changes}


async def test_create_read_update_delete_a_rule(make_gateway):
    gateway = await make_gateway()
    client = gateway.client
    response = await client.post(f"{API}/rules", headers=gateway.alice, json=rule_body(description="d"))
    assert response.status == 201, await response.text()
    body = await response.json()
    assert body["success"] is True
    rule = body["rule"]
    assert re.fullmatch(r"[0-9a-f]{32}", rule["id"])
    assert rule["user_id"] == "user_alice" and rule["name"] == "Say hello" and rule["description"] == "d"
    assert rule["trigger_type"] == "manual" and rule["trigger_config"] == {} and rule["conditions"] == {}
    assert rule["actions"] == [NOTIFY] and rule["enabled"] is True and rule["created_at"].endswith("Z")

    response = await client.get(f"{API}/rules/{rule['id']}", headers=gateway.alice)
    assert response.status == 200 and (await response.json())["rule"] == rule

    response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice, json={"enabled": False})
    assert response.status == 200
    updated = (await response.json())["rule"]
    assert updated["enabled"] is False and updated["name"] == "Say hello" and updated["actions"] == [NOTIFY]

    response = await client.get(f"{API}/rules", headers=gateway.alice)
    listing = await response.json()
    assert listing["count"] == 1 and listing["rules"][0]["id"] == rule["id"]

    response = await client.delete(f"{API}/rules/{rule['id']}", headers=gateway.alice)
    assert response.status == 200 and await response.json() == {"success": True}
    response = await client.get(f"{API}/rules/{rule['id']}", headers=gateway.alice)
    assert response.status == 404 and (await response.json())["errorType"] == "rule_not_found"


async def test_name_trigger_type_and_actions_are_required_and_checked(make_gateway):
    gateway = await make_gateway()
    cases = [
        ({"trigger_type": "manual", "actions": [NOTIFY]}, "validation_error", "name"),
        ({"name": "  ", "trigger_type": "manual", "actions": [NOTIFY]}, "validation_error", "name"),
        ({"name": 5, "trigger_type": "manual", "actions": [NOTIFY]}, "validation_error", "name"),
        ({"name": "x", "actions": [NOTIFY]}, "validation_error", "trigger_type"),
        ({"name": "x", "trigger_type": "manual"}, "validation_error", "actions"),
        ({"name": "x", "trigger_type": "manual", "actions": []}, "invalid_actions", "actions"),
        ({"name": "x", "trigger_type": "manual", "actions": "notify"}, "invalid_actions", "actions"),
        ({"name": "x", "trigger_type": "manual", "actions": [5]}, "invalid_actions", "actions"),
        ({"name": "x", "trigger_type": "manual", "actions": [{"title": "no type"}]}, "invalid_actions", "type"),
        ({"name": "x", "trigger_type": "manual", "actions": [{"type": "notify"}]}, "validation_error", "title"),
        ({"name": "x", "trigger_type": "manual", "actions": [{**NOTIFY, "colour": "red"}]}, "validation_error",
         "colour"),
        ({"name": "x", "trigger_type": "manual", "trigger_config": [], "actions": [NOTIFY]}, "validation_error",
         "trigger_config"),
        ({"name": "x", "trigger_type": "manual", "actions": [NOTIFY], "enabled": "maybe"}, "validation_error",
         "enabled"),
    ]
    for body, error_type, named in cases:
        response = await gateway.client.post(f"{API}/rules", headers=gateway.alice, json=body)
        answer = await response.json()
        assert response.status == 400, (body, answer)
        assert answer["errorType"] == error_type and named in answer["error"], (body, answer)
        assert answer["hint"]
    response = await gateway.client.post(f"{API}/rules", headers=gateway.alice, data=b"{not json")
    assert response.status == 400 and (await response.json())["errorType"] == "invalid_json"
    assert (await (await gateway.client.get(f"{API}/rules", headers=gateway.alice)).json())["count"] == 0


async def test_unknown_types_are_named_with_the_known_ones(make_gateway):
    gateway = await make_gateway()
    for body, kind, known in [
        (rule_body(trigger_type="sunrise"), "trigger", "time, device_state, event, manual"),
        (rule_body(conditions={"type": "moon_phase"}), "condition", "time_window, device_state, all, any"),
        (rule_body(conditions={"type": "all", "conditions": [{"type": "weather"}]}), "condition", "time_window"),
        (rule_body(actions=[NOTIFY, {"type": "email", "to": "x"}]), "action",
         "notify, device, message, scene, http, assistant")]:
        response = await gateway.client.post(f"{API}/rules", headers=gateway.alice, json=body)
        answer = await response.json()
        assert response.status == 400, answer
        assert answer["errorType"] == f"unknown_{kind}_type", answer
        assert known in answer["error"] and answer["known_types"], answer
        given = (body.get("trigger_type") if kind == "trigger" else "email" if kind == "action"
                 else "weather" if "weather" in str(body) else "moon_phase")
        assert repr(given) in answer["error"]


async def test_malformed_configs_of_each_type_are_refused(make_gateway):
    gateway = await make_gateway()
    bad = [
        rule_body(trigger_type="time", trigger_config={}),
        rule_body(trigger_type="time", trigger_config={"at": "tomorrow"}),
        rule_body(trigger_type="time", trigger_config={"at": "2020-01-01T00:00:00Z"}),
        rule_body(trigger_type="time", trigger_config={"cron": "every minute"}),
        rule_body(trigger_type="time", trigger_config={"cron": "* * * * *", "timezone": "Mars/Olympus"}),
        rule_body(trigger_type="time", trigger_config={"repeat": "daily"}),
        rule_body(trigger_type="time", trigger_config={"repeat": "daily", "time": "25:00"}),
        rule_body(trigger_type="time", trigger_config={"repeat": "weekly", "time": "07:30"}),
        rule_body(trigger_type="time", trigger_config={"repeat": "weekly", "time": "07:30", "weekdays": ["funday"]}),
        rule_body(trigger_type="time", trigger_config={"at": "2099-01-01T00:00:00Z", "cron": "* * * * *"}),
        rule_body(trigger_type="device_state", trigger_config={"device_id": "x", "property": "temperature"}),
        rule_body(trigger_type="device_state", trigger_config={"device_id": "x", "property": "t", "above": 1,
                                                               "below": 2}),
        rule_body(trigger_type="device_state", trigger_config={"device_id": "x", "property": "t", "above": "hot"}),
        rule_body(trigger_type="device_state", trigger_config={"property": "t", "above": 1}),
        rule_body(trigger_type="event", trigger_config={}),
        rule_body(trigger_type="event", trigger_config={"event": "has space"}),
        rule_body(trigger_type="manual", trigger_config={"when": "now"}),
        rule_body(conditions={"type": "time_window", "start": "22:00"}),
        rule_body(conditions={"type": "time_window", "start": "22:00", "end": "6am"}),
        rule_body(conditions={"type": "all", "conditions": []}),
        rule_body(conditions={"type": "device_state", "device_id": "x", "property": "on", "equals": [1]}),
        rule_body(conditions="sometimes"),
        rule_body(actions=[{"type": "device", "device_id": "living_room_ac", "action": "switch", "value": "on"}]),
        rule_body(actions=[{"type": "device", "device_id": "living_room_ac", "action": "set"}]),
        rule_body(actions=[{"type": "device", "device_id": "living_room_ac", "action": "explode"}]),
        rule_body(actions=[{"type": "device", "device_id": "living_room_ac", "action": "set",
                            "property": "target_temperature", "value": 10**309}]),
        rule_body(actions=[{"type": "device", "device_id": "living_room_ac", "action": "set",
                            "properties": {"target_temperature": 10**309}}]),
        rule_body(trigger_type="device_state", trigger_config={"device_id": "x", "property": "t", "equals": 10**309}),
        rule_body(actions=[{"type": "message"}]),
        rule_body(actions=[{"type": "message", "text": "hi", "session_id": "bad id"}]),
        rule_body(actions=[{"type": "scene", "scene_id": "not-a-scene"}]),
        rule_body(actions=[{"type": "http", "url": "ftp://example.org/x"}]),
        rule_body(actions=[{"type": "http", "url": "https://example.org", "method": "BREW"}]),
        rule_body(actions=[{"type": "assistant"}]),
        rule_body(actions=[{"type": "assistant", "prompt": "hi", "deliver": ["carrier pigeon"]}]),
        rule_body(actions=[NOTIFY] * 21),
    ]
    nested = {"type": "all", "conditions": [{"type": "time_window", "start": "01:00", "end": "02:00"}]}
    for _ in range(5):
        nested = {"type": "any", "conditions": [nested]}
    bad.append(rule_body(conditions=nested))
    for body in bad:
        response = await gateway.client.post(f"{API}/rules", headers=gateway.alice, json=body)
        answer = await response.json()
        assert response.status == 400, (body, answer)
        assert answer["error"].startswith("Invalid") and answer["errorType"] and answer["hint"], (body, answer)
    assert (await (await gateway.client.get(f"{API}/rules", headers=gateway.alice)).json())["count"] == 0


async def test_time_triggers_outside_the_years_that_can_be_scheduled_are_refused(make_gateway):
    """Localising these raised OverflowError in the scheduler: a 500."""
    gateway = await make_gateway()
    for config in ({"at": "0001-01-01T00:00:00", "timezone": "Asia/Shanghai"},
                   {"at": "9999-12-31T23:59:59", "timezone": "America/Los_Angeles"},
                   {"at": "9999-12-31T23:59:59"}, {"at": "0001-01-01T00:00:00+08:00"},
                   {"at": "9999-12-31T23:59:59-08:00"}):
        response = await gateway.client.post(f"{API}/rules", headers=gateway.alice,
                                             json=rule_body(trigger_type="time", trigger_config=config))
        answer = await response.json()
        assert response.status == 400, (config, answer)
        assert answer["errorType"] == "validation_error" and "1970 to 9998" in answer["error"], (config, answer)


async def test_every_type_saves_and_comes_back_as_sent(make_gateway):
    gateway = await make_gateway()
    scene = await gateway.client.post(f"{API}/scenes", headers=gateway.alice, json={"name": "Movie night"})
    scene_id = (await scene.json())["scene"]["id"]
    good = [
        rule_body(trigger_type="time", trigger_config={"at": "2099-06-01T08:00:00", "timezone": "Asia/Shanghai"}),
        rule_body(trigger_type="time", trigger_config={"cron": "30 7 * * 1-5", "timezone": "Europe/Paris"}),
        rule_body(trigger_type="time", trigger_config={"repeat": "daily", "time": "07:30"}),
        rule_body(trigger_type="time", trigger_config={"repeat": "weekly", "time": "18:00", "weekdays": ["sat"]}),
        rule_body(trigger_type="device_state", trigger_config={"device_id": "living_room_temperature",
                                                               "property": "temperature", "above": 28}),
        rule_body(trigger_type="device_state", trigger_config={"device_id": "front_door_lock", "property": "locked",
                                                               "equals": False}),
        rule_body(trigger_type="event", trigger_config={"event": "doorbell"}),
        rule_body(conditions={"type": "any", "conditions": [
            {"type": "time_window", "start": "22:00", "end": "06:00", "timezone": "Asia/Shanghai"},
            {"type": "all", "conditions": [
                {"type": "device_state", "device_id": "bedroom_humidity", "property": "humidity", "below": 30},
                {"type": "time_window", "start": "08:00", "end": "20:00", "weekdays": ["sat", "sun"]}]}]}),
        rule_body(actions={"type": "notify", "title": "one action, not a list"}),
        rule_body(actions=[
            {"type": "notify", "title": "t", "body": "b", "level": "warning"},
            {"type": "device", "device_id": "living_room_ac", "action": "switch", "value": True},
            {"type": "device", "device_id": "living_room_light", "action": "set", "property": "brightness",
             "value": 40},
            {"type": "device", "device_id": "bedroom_ac", "action": "set",
             "properties": {"mode": "cool", "target_temperature": 24}},
            {"type": "message", "text": "Good morning", "session_id": "main"},
            {"type": "scene", "scene_id": scene_id},
            {"type": "http", "url": "https://example.org/hook", "method": "POST", "headers": {"X-A": "b"},
             "body": {"a": 1}},
            {"type": "assistant", "prompt": "Summarise my day", "deliver": ["notification"]}]),
    ]
    for body in good:
        response = await gateway.client.post(f"{API}/rules", headers=gateway.alice, json=body)
        answer = await response.json()
        assert response.status == 201, (body, answer)
        rule = answer["rule"]
        for key in ("trigger_type", "trigger_config", "actions"):
            assert rule[key] == body.get(key, {})
        assert rule["conditions"] == body.get("conditions", {})
        assert (rule["next_run_at"] is not None) == (body["trigger_type"] == "time")
    rule = (await (await gateway.client.get(f"{API}/rules", headers=gateway.alice)).json())["rules"][0]
    assert rule["next_run_at"] == "2099-06-01T00:00:00.000Z"  # 08:00 in Shanghai


async def test_foreign_and_unknown_ids_are_404_and_the_administrator_passes_user_id(make_gateway):
    gateway = await make_gateway()
    client = gateway.client
    rule = await gateway.create_rule(gateway.alice, **rule_body())
    missing = "0" * 32
    for rule_id, headers in [(rule["id"], gateway.bob), (missing, gateway.alice), ("not-hex", gateway.alice)]:
        for method, suffix, body in [("GET", "", None), ("PUT", "", {"name": "stolen"}), ("DELETE", "", None),
                                     ("POST", "/trigger", None), ("GET", "/runs", None)]:
            response = await client.request(method, f"{API}/rules/{rule_id}{suffix}", headers=headers, json=body)
            assert response.status == 404, (method, suffix, await response.text())
            assert (await response.json())["errorType"] == "rule_not_found"
    assert (await (await client.get(f"{API}/rules", headers=gateway.bob)).json())["count"] == 0
    # Bob cannot name Alice, nor put her rule in his scene.
    response = await client.get(f"{API}/rules?user_id=user_alice", headers=gateway.bob)
    assert response.status == 403
    response = await client.post(f"{API}/scenes", headers=gateway.bob, json={"name": "s", "rule_ids": [rule["id"]]})
    assert response.status == 400 and (await response.json())["errorType"] == "unknown_rule"

    # The administrator lists, reads, changes and creates for Alice.
    listing = await (await client.get(f"{API}/rules?user_id=user_alice", headers=gateway.admin)).json()
    assert [r["id"] for r in listing["rules"]] == [rule["id"]]
    assert (await client.get(f"{API}/rules/{rule['id']}", headers=gateway.admin)).status == 200
    response = await client.put(f"{API}/rules/{rule['id']}?user_id=user_alice", headers=gateway.admin,
                                json={"name": "Renamed"})
    assert response.status == 200 and (await response.json())["rule"]["name"] == "Renamed"
    response = await client.post(f"{API}/rules", headers=gateway.admin, json=rule_body(user_id="user_bob"))
    assert response.status == 201 and (await response.json())["rule"]["user_id"] == "user_bob"
    assert (await (await client.get(f"{API}/rules", headers=gateway.bob)).json())["count"] == 1
    assert (await (await client.get(f"{API}/rules", headers=gateway.admin)).json())["count"] == 0
    response = await client.get(f"{API}/rules/{rule['id']}?user_id=user_bob", headers=gateway.admin)
    assert response.status == 404
    assert (await client.get(f"{API}/rules")).status == 401


async def test_partial_update_keeps_the_rest_and_is_checked_whole(make_gateway):
    gateway = await make_gateway()
    client = gateway.client
    rule = await gateway.create_rule(gateway.alice, **rule_body(
        trigger_type="time", trigger_config={"repeat": "daily", "time": "07:00"}, description="keep me"))
    response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice, json={"name": "Wake up"})
    saved = (await response.json())["rule"]
    assert saved["name"] == "Wake up" and saved["description"] == "keep me"
    assert saved["next_run_at"] == rule["next_run_at"] and saved["actions"] == rule["actions"]
    for body in ({"trigger_type": "event"}, {"actions": []}, {"conditions": {"type": "nope"}}, {"name": ""},
                 {"trigger_config": {"repeat": "weekly", "time": "07:00"}}):
        response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice, json=body)
        assert response.status == 400, (body, await response.text())
    response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice,
                                json={"trigger_type": "event", "trigger_config": {"event": "go"}})
    saved = (await response.json())["rule"]
    assert saved["trigger_type"] == "event" and saved["next_run_at"] is None
    response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice, json={"enabled": False})
    assert (await response.json())["rule"]["enabled"] is False
    response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice, json={
        "conditions": {"type": "time_window", "start": "08:00", "end": "09:00"}})
    assert (await response.json())["rule"]["conditions"]["type"] == "time_window"
    response = await client.put(f"{API}/rules/{rule['id']}", headers=gateway.alice, json={"conditions": None})
    assert (await response.json())["rule"]["conditions"] == {}
    current = (await (await client.get(f"{API}/rules/{rule['id']}", headers=gateway.alice)).json())["rule"]
    assert current["name"] == "Wake up" and current["trigger_config"] == {"event": "go"}


async def test_scenes_crud_and_errors(make_gateway):
    gateway = await make_gateway()
    client = gateway.client
    first = await gateway.create_rule(gateway.alice, **rule_body(name="Lights"))
    second = await gateway.create_rule(gateway.alice, **rule_body(name="Music"))
    response = await client.post(f"{API}/scenes", headers=gateway.alice, json={
        "name": "Movie night", "icon": "🎬", "rule_ids": [first["id"], second["id"]]})
    assert response.status == 201, await response.text()
    body = await response.json()
    scene = body["scene"]
    assert body["success"] is True and re.fullmatch(r"[0-9a-f]{32}", scene["id"])
    assert scene["name"] == "Movie night" and scene["icon"] == "🎬" and scene["rule_ids"] == [first["id"], second["id"]]
    assert scene["actions"] == [] and scene["user_id"] == "user_alice"
    assert (await (await client.get(f"{API}/scenes/{scene['id']}", headers=gateway.alice)).json())["scene"] == scene
    listing = await (await client.get(f"{API}/scenes", headers=gateway.alice)).json()
    assert listing["count"] == 1 and listing["scenes"][0]["id"] == scene["id"]
    response = await client.put(f"{API}/scenes/{scene['id']}", headers=gateway.alice, json={"icon": "🍿"})
    updated = (await response.json())["scene"]
    assert updated["icon"] == "🍿" and updated["name"] == "Movie night" and updated["rule_ids"] == scene["rule_ids"]
    # Deleting a rule takes it out of the scene.
    await client.delete(f"{API}/rules/{second['id']}", headers=gateway.alice)
    kept = (await (await client.get(f"{API}/scenes/{scene['id']}", headers=gateway.alice)).json())["scene"]
    assert kept["rule_ids"] == [first["id"]]

    for body in ({}, {"name": ""}, {"name": "x", "rule_ids": ["nope"]}, {"name": "x", "rule_ids": ["0" * 32]},
                 {"name": "x", "actions": [{"type": "teleport"}]}, {"name": "x", "icon": 5},
                 {"name": "x", "actions": [{"type": "scene", "scene_id": "f" * 32}]}):
        response = await client.post(f"{API}/scenes", headers=gateway.alice, json=body)
        assert response.status == 400, (body, await response.text())
    for method, suffix, body in [("GET", "", None), ("PUT", "", {"name": "mine"}), ("DELETE", "", None),
                                 ("POST", "/execute", None), ("GET", "/runs", None)]:
        response = await client.request(method, f"{API}/scenes/{scene['id']}{suffix}", headers=gateway.bob, json=body)
        assert response.status == 404 and (await response.json())["errorType"] == "scene_not_found"
    response = await client.get(f"{API}/scenes?user_id=user_alice", headers=gateway.admin)
    assert (await response.json())["count"] == 1
    response = await client.delete(f"{API}/scenes/{scene['id']}", headers=gateway.alice)
    assert response.status == 200 and await response.json() == {"success": True}
    assert (await client.get(f"{API}/scenes/{scene['id']}", headers=gateway.alice)).status == 404
    assert (await client.get(f"{API}/rules/{first['id']}", headers=gateway.alice)).status == 200


async def test_the_run_log_pages_newest_first_and_keeps_the_newest(make_gateway):
    import asyncio

    gateway = await make_gateway()
    rule = await gateway.create_rule(gateway.alice, **rule_body())
    for _ in range(4):
        assert (await gateway.client.post(f"{API}/rules/{rule['id']}/trigger", headers=gateway.alice)).status == 200
    page = await (await gateway.client.get(f"{API}/rules/{rule['id']}/runs?limit=3&offset=1",
                                           headers=gateway.alice)).json()
    assert page.get("total") == 4 and page["count"] == 3, page
    ids = [run["id"] for run in page["runs"]]
    assert ids == sorted(ids, reverse=True)
    for query in ("limit=0", "limit=201", "offset=-1", "limit=x"):
        response = await gateway.client.get(f"{API}/rules/{rule['id']}/runs?{query}", headers=gateway.alice)
        assert response.status == 400, query
    # An instance keeping two runs per rule prunes the older ones as it starts.
    pruning = await make_gateway(**{"plugins.automation": {"runs_kept": 2}})
    for _ in range(100):
        runs = await pruning.runs(pruning.alice, rule["id"])
        if len(runs) == 2:
            break
        await asyncio.sleep(0.05)
    assert [run["id"] for run in runs] == [max(ids) + 1, max(ids)]
