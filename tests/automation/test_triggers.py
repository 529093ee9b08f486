"""Triggers: the clock (the scheduler core's, set by the test), device changes from the real IoT
service, named events from a webhook call, and their conditions; each fires once."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from gateway.clock import ManualClock
from gateway.context import get_context
from plugins.automation.api import RUNNER
from plugins.iot.contract import DeviceChange
from tests.automation.conftest import API, feed_followed

START = datetime(2026, 11, 24, 6, 0, tzinfo=timezone.utc)  # a Tuesday; 14:00 in Shanghai
NOTIFY = {"type": "notify", "title": "Tick"}


def set_clock(*gateways, start: datetime = START) -> list[ManualClock]:
    clocks = []
    for gateway in gateways:
        clock = ManualClock(start)
        get_context(gateway.app).clock = clock
        clocks.append(clock)
    return clocks


async def settle(gateway, headers, rule_id, count, wait: float = 0.3) -> list[dict]:
    """The rule's finished runs once `count` are there, after a moment for any extra one."""
    await gateway.finished_runs(headers, rule_id, count)
    await asyncio.sleep(wait)
    return [run for run in await gateway.runs(headers, rule_id) if run["status"] != "running"]


# ---------------------------------------------------------------- time

async def test_a_one_off_time_rule_fires_once_at_its_instant(make_gateway):
    gateway = await make_gateway()
    [clock] = set_clock(gateway)
    rule = await gateway.create_rule(gateway.alice, name="Once", trigger_type="time", actions=[NOTIFY],
                                     trigger_config={"at": "2026-11-24T14:00:30", "timezone": "Asia/Shanghai"})
    assert rule["next_run_at"] == "2026-11-24T06:00:30.000Z"
    clock.advance(29)
    await asyncio.sleep(0.3)
    assert await gateway.runs(gateway.alice, rule["id"]) == []
    clock.advance(1)
    runs = await settle(gateway, gateway.alice, rule["id"], 1)
    assert len(runs) == 1 and runs[0]["trigger"] == "time" and runs[0]["status"] == "succeeded"
    assert runs[0]["trigger_detail"]["due_at"] == "2026-11-24T06:00:30.000Z"
    assert runs[0]["trigger_detail"]["late"] is False
    current = (await (await gateway.client.get(f"{API}/rules/{rule['id']}", headers=gateway.alice)).json())["rule"]
    assert current["next_run_at"] is None and current["last_run_at"] == "2026-11-24T06:00:30.000Z"
    clock.advance(timedelta(days=2))
    await asyncio.sleep(0.3)
    assert len(await gateway.runs(gateway.alice, rule["id"])) == 1


async def test_repeats_move_on_in_the_zone(make_gateway):
    gateway = await make_gateway()
    [clock] = set_clock(gateway)
    daily = await gateway.create_rule(gateway.alice, name="Daily", trigger_type="time", actions=[NOTIFY],
                                      trigger_config={"repeat": "daily", "time": "14:05", "timezone": "Asia/Shanghai"})
    weekly = await gateway.create_rule(gateway.alice, name="Weekly", trigger_type="time", actions=[NOTIFY],
                                       trigger_config={"repeat": "weekly", "time": "09:00", "weekdays": ["sat"],
                                                       "timezone": "Europe/Paris"})
    cron = await gateway.create_rule(gateway.alice, name="Cron", trigger_type="time", actions=[NOTIFY],
                                     trigger_config={"cron": "*/10 * * * *"})  # the plugin's zone: UTC
    assert daily["next_run_at"] == "2026-11-24T06:05:00.000Z"
    assert weekly["next_run_at"] == "2026-11-28T08:00:00.000Z"  # Saturday 09:00 CET
    assert cron["next_run_at"] == "2026-11-24T06:10:00.000Z"
    clock.advance(timedelta(minutes=5))
    await settle(gateway, gateway.alice, daily["id"], 1)
    clock.advance(timedelta(minutes=5))
    await settle(gateway, gateway.alice, cron["id"], 1)
    rules = {rule["name"]: rule for rule in
             (await (await gateway.client.get(f"{API}/rules", headers=gateway.alice)).json())["rules"]}
    assert rules["Daily"]["next_run_at"] == "2026-11-25T06:05:00.000Z"
    assert rules["Cron"]["next_run_at"] == "2026-11-24T06:20:00.000Z"
    assert await gateway.runs(gateway.alice, weekly["id"]) == []
    # Disabling a rule stops it; enabling it again plans from now.
    response = await gateway.client.put(f"{API}/rules/{cron['id']}", headers=gateway.alice, json={"enabled": False})
    assert (await response.json())["rule"]["next_run_at"] is None
    clock.advance(timedelta(minutes=30))
    await asyncio.sleep(0.3)
    assert len(await gateway.runs(gateway.alice, cron["id"])) == 1
    response = await gateway.client.put(f"{API}/rules/{cron['id']}", headers=gateway.alice, json={"enabled": True})
    assert (await response.json())["rule"]["next_run_at"] == "2026-11-24T06:50:00.000Z"


async def test_times_without_a_zone_are_read_in_the_persons_zone(make_gateway):
    from plugins.auth import auth_plugin

    gateway = await make_gateway(auth_plugin, clock=ManualClock(START), **{
        "auth.registration_enabled": True, "plugins.auth": {"default_timezone": "Europe/Paris"}})
    response = await gateway.client.post("/api/v1/auth/register", json={
        "username": "alice", "password": "secret-pass", "email": "alice@example.org", "nickname": "Alice",
        "verify_code": "ABC123"})
    assert response.status == 201, await response.text()
    response = await gateway.client.put("/api/v1/profile", headers=gateway.alice, json={"timezone": "Asia/Shanghai"})
    assert response.status == 200, await response.text()
    daily = {"name": "Daily", "trigger_type": "time", "actions": [NOTIFY],
             "trigger_config": {"repeat": "daily", "time": "14:05"}}
    alices = await gateway.create_rule(gateway.alice, **daily)
    bobs = await gateway.create_rule(gateway.bob, **daily)
    assert alices["next_run_at"] == "2026-11-24T06:05:00.000Z"   # 14:05 in Shanghai
    assert bobs["next_run_at"] == "2026-11-24T13:05:00.000Z"     # 14:05 in Paris, the deployment's default
    # A time window naming no zone is read in hers too: 14:00 in Shanghai is in 13:00-15:00.
    rule = await gateway.create_rule(gateway.alice, name="Window", trigger_type="event",
                                     trigger_config={"event": "check"}, actions=[NOTIFY],
                                     conditions={"type": "time_window", "start": "13:00", "end": "15:00"})
    response = await gateway.client.post(f"{API}/events/check", headers=gateway.alice)
    assert [run["status"] for run in (await response.json())["runs"]] == ["succeeded"], rule
    response = await gateway.client.post(f"{API}/events/check", headers=gateway.bob)
    assert (await response.json())["runs"] == []


async def test_late_within_the_grace_window_fires_and_says_so_older_is_skipped_and_recorded(make_gateway):
    gateway = await make_gateway(**{"plugins.automation": {"grace_seconds": 300}})
    [clock] = set_clock(gateway)
    late = await gateway.create_rule(gateway.alice, name="Late", trigger_type="time", actions=[NOTIFY],
                                     trigger_config={"at": "2026-11-24T06:01:00Z"})
    # The gateway "was down": nothing looked until two minutes after the instant.
    clock.set(START + timedelta(minutes=3))
    [run] = await settle(gateway, gateway.alice, late["id"], 1)
    assert run["status"] == "succeeded" and run["trigger_detail"]["late"] is True
    assert run["trigger_detail"]["late_by_seconds"] == 120 and "120s late" in run["note"]

    missed = await gateway.create_rule(gateway.alice, name="Missed", trigger_type="time", actions=[NOTIFY],
                                       trigger_config={"repeat": "daily", "time": "06:05"})
    clock.set(START + timedelta(minutes=20))
    [run] = await settle(gateway, gateway.alice, missed["id"], 1)
    assert run["status"] == "skipped" and run["results"] == []
    assert run["note"].startswith("missed: due at 2026-11-24T06:05:00.000Z, 900s ago")
    rule = (await (await gateway.client.get(f"{API}/rules/{missed['id']}", headers=gateway.alice)).json())["rule"]
    assert rule["next_run_at"] == "2026-11-25T06:05:00.000Z"


async def test_a_restart_with_rules_due_meanwhile(make_gateway):
    """The gateway stops; two rules fall due while it is down; a new instance starts ten minutes
    later: the one due two minutes ago fires late, the one due nine minutes ago is recorded as
    missed, and neither fires again."""
    automation = {"plugins.automation": {"grace_seconds": 300}}
    before = await make_gateway(clock=ManualClock(START), **automation)
    long_ago = await before.create_rule(before.alice, name="Long ago", trigger_type="time", actions=[NOTIFY],
                                        trigger_config={"at": "2026-11-24T06:01:00Z"})
    recent = await before.create_rule(before.alice, name="Recent", trigger_type="time", actions=[NOTIFY],
                                      trigger_config={"at": "2026-11-24T06:08:00Z"})
    await before.client.close()
    after = await make_gateway(clock=ManualClock(START + timedelta(minutes=10)), **automation)
    [missed] = await settle(after, after.alice, long_ago["id"], 1)
    [late] = await settle(after, after.alice, recent["id"], 1)
    assert missed["status"] == "skipped" and missed["trigger_detail"]["late_by_seconds"] == 540
    assert "past the grace window of 300s" in missed["note"]
    assert late["status"] == "succeeded" and late["trigger_detail"]["late"] is True
    assert late["trigger_detail"]["late_by_seconds"] == 120
    rules = (await (await after.client.get(f"{API}/rules", headers=after.alice)).json())["rules"]
    assert [rule["next_run_at"] for rule in rules] == [None, None]


async def test_two_gateway_instances_fire_a_due_rule_once(make_stack):
    stack = await make_stack(instances=2)
    first, second = stack.gateways
    clocks = set_clock(first, second)
    rule = await first.create_rule(first.alice, name="Ping the site", trigger_type="time",
                                   trigger_config={"cron": "* * * * *"},
                                   actions=[{"type": "http", "url": f"{stack.site_url}/tick", "method": "POST"}])
    for minute in range(1, 4):
        for clock in clocks:
            clock.set(START + timedelta(minutes=minute))
        await settle(first, first.alice, rule["id"], minute, wait=0.2)
    runs = await settle(second, second.alice, rule["id"], 3)
    assert len(runs) == 3 and all(run["status"] == "succeeded" for run in runs)
    assert [hit["path"] for hit in stack.site_hits] == ["/tick"] * 3
    assert sorted(run["trigger_detail"]["due_at"] for run in runs) == [
        f"2026-11-24T06:0{minute}:00.000Z" for minute in range(1, 4)]


# ---------------------------------------------------------------- events

async def test_named_events_with_a_bearer_or_the_webhook_key(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    rule = await gateway.create_rule(gateway.alice, name="Doorbell", trigger_type="event",
                                     trigger_config={"event": "doorbell"},
                                     actions=[{"type": "notify", "title": "Someone is at the {{payload.button}} door",
                                               "body": "{{event}} {{payload.missing}}"}])
    other = await gateway.create_rule(gateway.alice, name="Other", trigger_type="event",
                                      trigger_config={"event": "mail"}, actions=[NOTIFY])
    response = await client.post(f"{API}/events/doorbell", headers=gateway.alice, json={"button": "front"})
    answer = await response.json()
    assert response.status == 200, answer
    assert answer["success"] is True and answer["event"] == "doorbell" and len(answer["runs"]) == 1
    assert answer["runs"][0]["rule_id"] == rule["id"] and answer["runs"][0]["status"] == "succeeded"
    assert answer["runs"][0]["trigger_detail"] == {"event": "doorbell", "payload": {"button": "front"}}
    assert answer["runs"][0]["results"][0]["detail"] == "notified: Someone is at the front door"
    # The operator's key acts for the named person; Bob's own bearer reaches only Bob's rules.
    key = {"X-Webhook-Key": "test-webhook-key"}
    response = await client.post(f"{API}/events/doorbell?user_id=user_alice", headers=key)
    assert response.status == 200 and len((await response.json())["runs"]) == 1
    response = await client.post(f"{API}/events/doorbell", headers=gateway.bob)
    assert response.status == 200 and (await response.json())["runs"] == []
    assert len(await gateway.runs(gateway.alice, rule["id"])) == 2
    assert await gateway.runs(gateway.alice, other["id"]) == []
    for headers, query, status, error_type in [
            ({"X-Webhook-Key": "wrong"}, "?user_id=user_alice", 401, "invalid_webhook_key"),
            (key, "", 400, "validation_error"), ({}, "?user_id=user_alice", 401, None),
            (gateway.bob, "?user_id=user_alice", 403, None)]:
        response = await client.post(f"{API}/events/doorbell{query}", headers=headers)
        assert response.status == status, (headers, query, await response.text())
        if error_type:
            assert (await response.json())["errorType"] == error_type
    response = await client.post(f"{API}/events/door%20bell", headers=gateway.alice)
    assert response.status == 400
    response = await client.post(f"{API}/events/doorbell", headers=gateway.alice, data=b"[1, 2")
    assert response.status == 400
    assert len(await gateway.runs(gateway.alice, rule["id"])) == 2


# ---------------------------------------------------------------- conditions

async def test_conditions_decide_whether_an_event_runs_the_actions(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    [clock] = set_clock(gateway)  # 14:00 in Shanghai, a Tuesday
    evening = {"type": "time_window", "start": "18:00", "end": "06:00", "timezone": "Asia/Shanghai"}
    afternoon = {"type": "time_window", "start": "13:00", "end": "15:00", "timezone": "Asia/Shanghai",
                 "weekdays": ["tue"]}
    locked = {"type": "device_state", "device_id": "front_door_lock", "property": "locked", "equals": True}
    cases = {
        "evening": (evening, "skipped"),
        "afternoon": (afternoon, "succeeded"),
        "afternoon on weekends": ({**afternoon, "weekdays": ["sat", "sun"]}, "skipped"),
        "locked": (locked, "succeeded"),
        "all": ({"type": "all", "conditions": [afternoon, locked]}, "succeeded"),
        "all but one": ({"type": "all", "conditions": [afternoon, evening]}, "skipped"),
        "any": ({"type": "any", "conditions": [evening, {"type": "any", "conditions": [locked]}]}, "succeeded"),
        "list means all": ([afternoon, locked], "succeeded"),
        "warm": ({"type": "device_state", "device_id": "bedroom_temperature", "property": "temperature",
                  "above": 30}, "skipped"),
        "unknown device": ({"type": "device_state", "device_id": "garage", "property": "open", "equals": True},
                           "skipped"),
    }
    rules = {}
    for name, (conditions, _) in cases.items():
        rules[name] = await gateway.create_rule(gateway.alice, name=name, trigger_type="event",
                                                trigger_config={"event": "check"}, conditions=conditions,
                                                actions=[NOTIFY])
    response = await client.post(f"{API}/events/check", headers=gateway.alice)
    runs = {run["rule_id"]: run for run in (await response.json())["runs"]}
    for name, (_, status) in cases.items():
        run = runs[rules[name]["id"]]
        assert run["status"] == status, (name, run)
        if status == "skipped":
            assert run["note"].startswith("conditions not met: ") and run["results"] == []
    assert "outside 18:00-06:00" in runs[rules["evening"]["id"]]["note"]
    assert "garage" in runs[rules["unknown device"]["id"]]["note"]
    # At 23:00 in Shanghai the evening rule runs; a manual trigger ignores conditions.
    clock.set(START + timedelta(hours=9))
    response = await client.post(f"{API}/events/check", headers=gateway.alice)
    runs = {run["rule_id"]: run for run in (await response.json())["runs"]}
    assert runs[rules["evening"]["id"]]["status"] == "succeeded"
    response = await client.post(f"{API}/rules/{rules['warm']['id']}/trigger", headers=gateway.alice)
    assert (await response.json())["run"]["status"] == "succeeded"


# ---------------------------------------------------------------- device changes

async def test_a_device_change_heard_twice_fires_a_rule_once(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    rule = await gateway.create_rule(gateway.alice, name="Unlocked", trigger_type="device_state",
                                     trigger_config={"device_id": "front_door_lock", "property": "locked",
                                                     "equals": False}, actions=[NOTIFY])
    runner = gateway.app[RUNNER]
    change = DeviceChange(event_id="e" * 32, user_id="user_alice", device_id="front_door_lock",
                          device={"id": "front_door_lock", "state": {"locked": False}},
                          changes={"locked": {"from": True, "to": False}}, cause="operation",
                          timestamp="2026-11-24T06:00:00.000Z")
    await asyncio.gather(runner.on_device_change(change), runner.on_device_change(change))
    await runner.on_device_change(change)
    runs = await settle(gateway, gateway.alice, rule["id"], 1)
    assert len(runs) == 1 and runs[0]["trigger_detail"]["event_id"] == "e" * 32
    # Bob's identical change is Bob's: Alice's rule does not hear it.
    await runner.on_device_change(DeviceChange(**{**change.__dict__, "event_id": "f" * 32, "user_id": "user_bob"}))
    await asyncio.sleep(0.2)
    assert len(await gateway.runs(gateway.alice, rule["id"])) == 1


async def test_an_unlocked_door_through_the_iot_service_fires_the_rule(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    rule = await gateway.create_rule(gateway.alice, name="Door open", trigger_type="device_state",
                                     trigger_config={"device_id": "front_door_lock", "property": "locked",
                                                     "equals": False}, actions=[NOTIFY])
    await feed_followed(stack)
    for locked in (False, False, True, False):
        response = await gateway.client.post("/api/v1/devices/front_door_lock/operate", headers=gateway.alice,
                                             json={"action": "switch", "value": locked})
        assert response.status == 200, await response.text()
    runs = await settle(gateway, gateway.alice, rule["id"], 2)
    assert len(runs) == 2  # unlocked twice; the second "unlock" of an unlocked door changed nothing
    assert {run["trigger_detail"]["cause"] for run in runs} == {"operation"}
    assert {(run["trigger_detail"]["from"], run["trigger_detail"]["to"]) for run in runs} == {(True, False)}
