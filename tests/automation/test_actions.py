"""Each action type done for real: a notification on the person's devices, a device operated in
the IoT service's simulated home, an assistant message in a session, a scene, an outside URL
called through the guarded fetcher, and a turn of the assistant (the AI core's offline agent)
whose reply is delivered; `POST …/trigger` and scene `execute` report what each did."""
from __future__ import annotations

import asyncio

from tests.automation.conftest import API, frames_until, of_type
from tests.support.asyncapi import FrameChecker


def token_of(headers: dict) -> str:
    return headers["Authorization"].split(" ", 1)[1]


async def test_trigger_runs_every_kind_of_action_and_reports_each(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    response = await client.post(f"{API}/scenes", headers=gateway.alice, json={
        "name": "Movie night", "icon": "🎬",
        "actions": [{"type": "device", "device_id": "living_room_light", "action": "set", "property": "brightness",
                     "value": 20}]})
    scene = (await response.json())["scene"]
    rule = await gateway.create_rule(gateway.alice, name="Everything", trigger_type="manual", actions=[
        {"type": "notify", "title": "Hot in here", "body": "Switching the AC on", "level": "warning"},
        {"type": "device", "device_id": "living_room_ac", "action": "switch", "value": True},
        {"type": "device", "device_id": "living_room_ac", "action": "set",
         "properties": {"mode": "cool", "target_temperature": 24}},
        {"type": "message", "text": "I switched the living-room AC on."},
        {"type": "scene", "scene_id": scene["id"]},
        {"type": "http", "url": f"{stack.site_url}/hook", "method": "POST", "headers": {"X-Rule": "yes"},
         "body": {"hello": "world"}},
        {"type": "assistant", "prompt": "list my automations", "deliver": ["session", "notification"]}])
    async with client.ws_connect(f"/ws/chat?token={token_of(gateway.alice)}&session_id=phone") as phone, \
            client.ws_connect(f"/ws/chat?token={token_of(gateway.bob)}&session_id=other") as bob_phone:
        response = await client.post(f"{API}/rules/{rule['id']}/trigger", headers=gateway.alice)
        assert response.status == 200, await response.text()
        answer = await response.json()
        frames = await frames_until(phone, "notification", 2)
        notifications, messages = of_type(frames, "notification"), of_type(frames, "response")
        try:
            frame = await asyncio.wait_for(bob_phone.receive_json(), 0.3)
            assert frame["type"] not in ("notification", "response"), frame
        except asyncio.TimeoutError:
            pass
    # Every frame the rule made the phone receive fits the gateway's AsyncAPI document.
    checker = FrameChecker(await (await client.get("/api/v1/asyncapi.json")).json())
    for frame in frames:
        checker.check(frame)
    assert answer["success"] is True
    assert answer["message"] == "Rule 'Everything' ran 7 actions: 7 succeeded.", answer
    results = answer["results"]
    assert [result["type"] for result in results] == ["notify", "device", "device", "message", "scene", "http",
                                                      "assistant"]
    assert all(result["ok"] for result in results), results
    assert results[1]["detail"] == "living_room_ac: on False → True"
    assert "mode" not in results[2]["detail"] and "target_temperature 26 → 24" in results[2]["detail"]
    assert results[4]["results"][0]["detail"] == "living_room_light: brightness 80 → 20"
    assert results[5]["status"] == 200 and "answered 200" in results[5]["detail"]
    assert "Everything" in results[6]["reply"] and "Movie night" in results[6]["reply"]
    assert answer["run"]["trigger"] == "manual" and answer["run"]["status"] == "succeeded"

    assert notifications[0]["notification"]["title"] == "Hot in here"
    assert notifications[0]["notification"]["type"] == "warning"
    assert notifications[0]["notification"]["data"] == {"source": f"automation:{rule['id']}"}
    assert notifications[1]["notification"]["body"] == results[6]["reply"]
    assert messages[0]["role"] == "assistant" and messages[0]["session_id"] == "automation"
    assert messages[0]["content"] == "I switched the living-room AC on."

    device = await (await client.get("/api/v1/devices/living_room_ac", headers=gateway.alice)).json()
    assert device["device"]["state"]["on"] is True and device["device"]["state"]["target_temperature"] == 24
    history = await (await client.get("/api/v1/devices/living_room_ac/history", headers=gateway.alice)).json()
    assert {operation["source"] for operation in history["operations"]} == {f"automation:{rule['id']}"}
    bob_device = await (await client.get("/api/v1/devices/living_room_ac", headers=gateway.bob)).json()
    assert bob_device["device"]["state"]["on"] is False

    assert len(stack.site_hits) == 1
    hit = stack.site_hits[0]
    assert hit["method"] == "POST" and hit["path"] == "/hook" and hit["headers"]["X-Rule"] == "yes"
    assert hit["body"] == '{"hello": "world"}'

    history = await (await client.get("/api/v1/sessions/automation/messages", headers=gateway.alice)).json()
    contents = [(message["role"], message["content"]) for message in history["messages"]]
    assert ("assistant", "I switched the living-room AC on.") in contents
    assert ("user", "list my automations") in contents and ("assistant", results[6]["reply"]) in contents

    runs = await gateway.runs(gateway.alice, rule["id"])
    assert len(runs) == 1 and runs[0]["results"] == results


async def test_failing_actions_are_reported_and_do_not_stop_the_others(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    other_port_url = stack.site_url.rsplit(":", 1)[0] + ":1"  # loopback, but not the allowed endpoint
    rule = await gateway.create_rule(gateway.alice, name="Mixed", trigger_type="manual", actions=[
        {"type": "device", "device_id": "garage_door", "action": "switch", "value": True},
        {"type": "device", "device_id": "living_room_ac", "action": "set", "property": "target_temperature",
         "value": 99},
        {"type": "http", "url": f"{stack.site_url}/broken", "method": "GET"},
        {"type": "http", "url": f"{other_port_url}/admin", "method": "GET"},
        {"type": "http", "url": "http://169.254.169.254/latest/meta-data", "method": "GET"},
        {"type": "notify", "title": "Still told"}])
    response = await gateway.client.post(f"{API}/rules/{rule['id']}/trigger", headers=gateway.alice)
    answer = await response.json()
    assert response.status == 200 and answer["success"] is True
    assert answer["message"] == "Rule 'Mixed' ran 6 actions: 1 succeeded, 5 failed.", answer["results"]
    results = answer["results"]
    assert [result["ok"] for result in results] == [False, False, False, False, False, True]
    assert "garage_door" in results[0]["error"]
    assert "target_temperature" in results[1]["error"]
    assert "answered 500" in results[2]["error"]
    assert "loopback or private" in results[3]["error"]
    assert "[plugins.automation] http_hosts" in results[3]["error"]
    assert "169.254.169.254" in results[4]["error"]
    assert answer["run"]["status"] == "partial"
    assert [hit["path"] for hit in stack.site_hits] == ["/broken"]


async def test_scene_execute_runs_its_actions_then_its_rules_and_never_itself(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    lights = await gateway.create_rule(gateway.alice, name="Lights down", trigger_type="manual", actions=[
        {"type": "device", "device_id": "living_room_light", "action": "switch", "value": True},
        {"type": "device", "device_id": "living_room_light", "action": "set", "property": "brightness",
         "value": 10}])
    curtains = await gateway.create_rule(gateway.alice, name="Curtains", trigger_type="event",
                                         trigger_config={"event": "dusk"}, actions=[
        {"type": "device", "device_id": "living_room_curtain", "action": "set", "property": "position",
         "value": 0}])
    response = await client.post(f"{API}/scenes", headers=gateway.alice, json={
        "name": "Movie night", "rule_ids": [lights["id"], curtains["id"]],
        "actions": [{"type": "notify", "title": "Enjoy the film"}]})
    scene = (await response.json())["scene"]
    # A scene that names itself (through an update) fails that action only.
    response = await client.put(f"{API}/scenes/{scene['id']}", headers=gateway.alice, json={"actions": [
        {"type": "notify", "title": "Enjoy the film"}, {"type": "scene", "scene_id": scene["id"]}]})
    assert response.status == 200, await response.text()
    response = await client.post(f"{API}/scenes/{scene['id']}/execute", headers=gateway.alice)
    answer = await response.json()
    assert response.status == 200 and answer["success"] is True
    assert [(result["type"], result["ok"], result.get("rule_id")) for result in answer["results"]] == [
        ("notify", True, None), ("scene", False, None), ("device", True, lights["id"]),
        ("device", True, lights["id"]), ("device", True, curtains["id"])]
    assert "cannot run itself" in answer["results"][1]["error"]
    assert answer["message"] == "Scene 'Movie night' ran 5 actions: 4 succeeded, 1 failed."
    light = await (await client.get("/api/v1/devices/living_room_light", headers=gateway.alice)).json()
    assert light["device"]["state"]["on"] is True and light["device"]["state"]["brightness"] == 10
    runs = await (await client.get(f"{API}/scenes/{scene['id']}/runs", headers=gateway.alice)).json()
    assert runs["total"] == 1 and runs["runs"][0]["scene_id"] == scene["id"] and runs["runs"][0]["trigger"] == "scene"
    # Bob cannot run it; the administrator can, for Alice.
    assert (await client.post(f"{API}/scenes/{scene['id']}/execute", headers=gateway.bob)).status == 404
    response = await client.post(f"{API}/scenes/{scene['id']}/execute?user_id=user_alice", headers=gateway.admin)
    assert response.status == 200


async def test_scenes_run_scenes_and_an_assistant_reply_can_stay_in_its_session(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    inner = (await (await client.post(f"{API}/scenes", headers=gateway.alice, json={
        "name": "Lights", "actions": [{"type": "device", "device_id": "bedroom_light", "action": "switch",
                                       "value": True}]})).json())["scene"]
    outer = (await (await client.post(f"{API}/scenes", headers=gateway.alice, json={
        "name": "Evening", "actions": [
            {"type": "scene", "scene_id": inner["id"]},
            {"type": "http", "url": f"{stack.site_url}/evening", "method": "GET"},
            {"type": "assistant", "prompt": "list my automations", "session_id": "evening",
             "deliver": ["session"]}]})).json())["scene"]
    async with client.ws_connect(f"/ws/chat?token={token_of(gateway.alice)}&session_id=phone") as phone:
        answer = await (await client.post(f"{API}/scenes/{outer['id']}/execute", headers=gateway.alice)).json()
        frames = []
        try:
            while True:
                frames.append(await asyncio.wait_for(phone.receive_json(), 0.5))
        except asyncio.TimeoutError:
            pass
    assert [result["ok"] for result in answer["results"]] == [True, True, True], answer
    assert answer["results"][0]["results"][0]["detail"] == "bedroom_light: on False → True"
    assert stack.site_hits[0]["method"] == "GET" and stack.site_hits[0]["body"] == ""
    assert of_type(frames, "notification") == []  # the reply stayed in its session
    ends = of_type(frames, "stream_end")
    assert ends and ends[-1]["text"] == answer["results"][2]["reply"]
    history = await (await client.get("/api/v1/sessions/evening/messages", headers=gateway.alice)).json()
    assert [message["role"] for message in history["messages"]][-2:] == ["user", "assistant"]


async def test_consecutive_messages_into_one_session_arrive_together_as_one_multi_message(make_stack):
    """Said together: the person's devices get one `multi_message`; a message into another
    session, or after another action, is a `response` of its own."""
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    rule = await gateway.create_rule(gateway.alice, name="Good night", trigger_type="manual", actions=[
        {"type": "message", "text": "Good night!"},
        {"type": "message", "text": "The doors are locked."},
        {"type": "message", "text": "Elsewhere.", "session_id": "other"},
        {"type": "notify", "title": "Night mode", "body": "on"},
        {"type": "message", "text": "Sleep well."}])
    token = token_of(gateway.alice)
    async with client.ws_connect(f"/ws/chat?token={token}&session_id=phone&client_id=phone") as phone, \
            client.ws_connect(f"/ws/chat?token={token}&session_id=phone&client_id=laptop") as laptop:
        answer = await (await client.post(f"{API}/rules/{rule['id']}/trigger", headers=gateway.alice)).json()
        received = [await frames_until(device, "notification") for device in (phone, laptop)]
        for device, frames in zip((phone, laptop), received):
            frames += await frames_until(device, "response")
    checker = FrameChecker(await (await client.get("/api/v1/asyncapi.json")).json())
    results = answer["results"]
    assert [result["ok"] for result in results] == [True] * 5, results
    for frames in received:
        for frame in frames:
            checker.check(frame)
        assert [frame["type"] for frame in frames] == ["multi_message", "response", "notification", "response"]
        together = frames[0]
        assert together["session_id"] == "automation" and together["role"] == "assistant"
        assert together["multi_message"]["messages"] == [
            {"index": 0, "content": "Good night!", "msg_type": "chat", "message_id": results[0]["message_id"]},
            {"index": 1, "content": "The doors are locked.", "msg_type": "chat",
             "message_id": results[1]["message_id"]}]
        assert (frames[1]["session_id"], frames[1]["content"]) == ("other", "Elsewhere.")
        assert (frames[3]["session_id"], frames[3]["content"]) == ("automation", "Sleep well.")
    history = await (await client.get("/api/v1/sessions/automation/messages", headers=gateway.alice)).json()
    assert [message["content"] for message in history["messages"]] == ["Good night!", "The doors are locked.",
                                                                       "Sleep well."]
