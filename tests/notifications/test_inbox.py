"""The inbox: every pushed notification stored, listed newest first with an unread filter and
paging, marked read (one and all), deleted; each person sees only their own. A device that was
away when a notification came is sent it, on that connection only, when it connects again; a
device that saw it live is not."""
from datetime import datetime, timedelta, timezone

import pytest

from gateway.app import create_app
from gateway.clock import ManualClock
from gateway.context import get_context
from gateway.identity import Identity
from plugins.auth import tokens_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.notifications.contract import NOTIFICATIONS

from gateway.database import fetch_value

from .devices import DevicePlugin, bearer, device_away, device_known, nothing_arrives, until

API = "/api/v1"
ALICE = Identity("user_alice", "alice")
BOB = Identity("user_bob", "bob")
ADMIN = Identity("admin", "admin", is_admin=True)
START = datetime(2026, 11, 24, 8, 0, tzinfo=timezone.utc)


@pytest.fixture
async def gateway(aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url})
    app = create_app("gateway", config, plugins=[tokens_plugin, notifications_plugin, DevicePlugin()])
    get_context(app).clock = ManualClock(START)
    client = await aiohttp_client(app)
    return app, client


async def push(app, user_id, title, type="info", body="", **data):
    notifications = get_context(app).contracts.require(NOTIFICATIONS)
    get_context(app).clock.advance(1)  # one second apart: newest first is well defined
    return await notifications.push(user_id, type, title, body, data)


async def test_the_inbox_lists_marks_and_deletes(gateway):
    app, client = gateway
    alice, bob, admin = bearer(app, ALICE), bearer(app, BOB), bearer(app, ADMIN)
    first = await push(app, "user_alice", "first", body="one", n=1)
    second = await push(app, "user_alice", "second", type="reminder", reminder_id="r1")
    third = await push(app, "user_alice", "third")
    await push(app, "user_bob", "bob's")
    response = await client.get(f"{API}/notifications", headers=alice)
    assert response.status == 200
    page = await response.json()
    assert [n["title"] for n in page["notifications"]] == ["third", "second", "first"]
    assert (page["count"], page["total"], page["unread"], page["limit"], page["offset"]) == (3, 3, 3, 50, 0)
    oldest = page["notifications"][-1]
    assert oldest == {"id": first["id"], "type": "info", "title": "first", "body": "one", "data": {"n": 1},
                      "user_id": "user_alice", "timestamp": "2026-11-24T08:00:01.000Z", "read": False,
                      "read_at": None}
    # Mark one read: the unread filter and counts follow.
    response = await client.post(f"{API}/notifications/{second['id']}/read", headers=alice)
    assert response.status == 200
    read = (await response.json())["notification"]
    assert read["read"] is True and read["read_at"] == "2026-11-24T08:00:04.000Z"
    page = await (await client.get(f"{API}/notifications?unread=true", headers=alice)).json()
    assert [n["title"] for n in page["notifications"]] == ["third", "first"] and page["unread"] == 2
    page = await (await client.get(f"{API}/notifications?type=reminder", headers=alice)).json()
    assert [n["id"] for n in page["notifications"]] == [second["id"]] and page["total"] == 1
    # Paging.
    page = await (await client.get(f"{API}/notifications?limit=1&offset=1", headers=alice)).json()
    assert [n["title"] for n in page["notifications"]] == ["second"] and page["total"] == 3 and page["count"] == 1
    response = await client.get(f"{API}/notifications/{third['id']}", headers=alice)
    assert (await response.json())["notification"]["title"] == "third"
    # Read all, then delete one.
    response = await client.post(f"{API}/notifications/read-all", headers=alice)
    assert await response.json() == {"success": True, "updated": 2}
    assert (await (await client.get(f"{API}/notifications?unread=1", headers=alice)).json())["total"] == 0
    response = await client.delete(f"{API}/notifications/{first['id']}", headers=alice)
    assert await response.json() == {"success": True}
    page = await (await client.get(f"{API}/notifications", headers=alice)).json()
    assert [n["title"] for n in page["notifications"]] == ["third", "second"]
    # Bob sees only his; the administrator sees Alice's with user_id; Bob may not.
    page = await (await client.get(f"{API}/notifications", headers=bob)).json()
    assert [n["title"] for n in page["notifications"]] == ["bob's"]
    page = await (await client.get(f"{API}/notifications?user_id=user_alice", headers=admin)).json()
    assert page["total"] == 2
    assert (await client.get(f"{API}/notifications?user_id=user_alice", headers=bob)).status == 403


async def test_errors(gateway):
    app, client = gateway
    alice, bob = bearer(app, ALICE), bearer(app, BOB)
    mine = await push(app, "user_alice", "mine")
    for method, path in (("GET", ""), ("POST", "/read"), ("DELETE", "")):
        for unknown in (mine["id"].replace(mine["id"][:8], "00000000"), "not-a-uuid"):
            response = await client.request(method, f"{API}/notifications/{unknown}{path}", headers=alice)
            assert response.status == 404
            body = await response.json()
            assert body["errorType"] == "notification_not_found" and body["hint"]
        response = await client.request(method, f"{API}/notifications/{mine['id']}{path}", headers=bob)
        assert response.status == 404  # someone else's is not found either
    for query in ("limit=0", "limit=201", "offset=-1", "unread=perhaps", "type=urgent", "limit=x"):
        response = await client.get(f"{API}/notifications?{query}", headers=alice)
        assert response.status == 400, query
        assert (await response.json())["errorType"] == "validation_error"
    assert (await client.get(f"{API}/notifications")).status == 401
    assert (await client.post(f"{API}/notifications/read-all?user_id=user_bob", headers=alice)).status == 403
    # Nothing was lost on the way.
    assert (await (await client.get(f"{API}/notifications", headers=alice)).json())["total"] == 1


async def test_a_push_with_a_known_id_is_sent_and_stored_once(gateway):
    app, client = gateway
    notifications = get_context(app).contracts.require(NOTIFICATIONS)
    async with client.ws_connect("/ws/device?client_id=phone", headers=bearer(app, ALICE)) as phone:
        await device_known(app, "user_alice", "phone")
        key = "7b0c4a52-2f43-5b8e-9d7e-0d0f4e1c2a11"
        first = await notifications.push("user_alice", "reminder", "Pills", "Take them", {"r": 1},
                                         notification_id=key)
        again = await notifications.push("user_alice", "reminder", "Pills", "Take them", {"r": 1},
                                         notification_id=key)
        assert first["id"] == again["id"] == key and first["timestamp"] == again["timestamp"]
        frame = await phone.receive_json(timeout=3)
        assert frame["notification"]["id"] == key and "missed" not in frame
        await nothing_arrives(phone)
    page = await (await client.get(f"{API}/notifications", headers=bearer(app, ALICE))).json()
    assert page["total"] == 1


async def test_a_device_away_gets_what_it_missed_when_it_returns_and_no_more(gateway):
    app, client = gateway
    clock = get_context(app).clock
    alice = bearer(app, ALICE)
    # The phone and the laptop have been here before; the tablet is new.
    async with client.ws_connect("/ws/device?client_id=phone", headers=alice):
        await device_known(app, "user_alice", "phone")
    await device_away(app, "user_alice", "phone")
    clock.advance(60)
    async with client.ws_connect("/ws/device?client_id=laptop", headers=alice) as laptop:
        await device_known(app, "user_alice", "laptop")
        clock.advance(60)
        seen_live = await push(app, "user_alice", "9:00 call mom", type="reminder", reminder_id="r9")
        frame = await laptop.receive_json(timeout=3)
        assert frame["notification"]["id"] == seen_live["id"] and "missed" not in frame
        already_read = await push(app, "user_alice", "read elsewhere")
        await laptop.receive_json(timeout=3)
        await client.post(f"{API}/notifications/{already_read['id']}/read", headers=alice)
        await push(app, "user_bob", "not alice's")
        clock.advance(60)
    await device_away(app, "user_alice", "laptop")
    clock.advance(60)
    # The phone returns: the unread one that came while it was away, on its connection only.
    async with client.ws_connect("/ws/device?client_id=phone", headers=alice) as phone, \
            client.ws_connect("/ws/device?client_id=tablet", headers=alice) as tablet:
        frame = await phone.receive_json(timeout=3)
        assert frame["type"] == "notification" and frame["missed"] is True
        assert frame["notification"] == {"id": seen_live["id"], "type": "reminder", "title": "9:00 call mom",
                                         "body": "", "timestamp": seen_live["timestamp"],
                                         "data": {"reminder_id": "r9"}}
        await nothing_arrives(phone)
        await nothing_arrives(tablet, 0.1)  # a device seen for the first time was never away
        # The laptop saw it live: it is not sent again.
        async with client.ws_connect("/ws/device?client_id=laptop", headers=alice) as laptop:
            await device_known(app, "user_alice", "laptop")
            await nothing_arrives(laptop)
    await device_away(app, "user_alice", "phone")
    clock.advance(60)
    # Back once more: it already had it.
    async with client.ws_connect("/ws/device?client_id=phone", headers=alice) as phone:
        await nothing_arrives(phone)


async def test_connected_devices_are_marked_seen_so_a_crash_resends_little(aiohttp_client, make_config,
                                                                          database_url):
    """Without a goodbye (the instance crashed) a device's last sighting is its last heartbeat,
    so on its return it is re-sent at most what came within one heartbeat of the crash."""
    config = make_config({"database.url": database_url, "plugins.notifications": {"device_heartbeat": 0.1}})
    app = create_app("gateway", config, plugins=[tokens_plugin, notifications_plugin, DevicePlugin()])
    clock = get_context(app).clock = ManualClock(START)
    client = await aiohttp_client(app)
    db = get_context(app).db
    async with client.ws_connect("/ws/device?client_id=phone", headers=bearer(app, ALICE)):
        await device_known(app, "user_alice", "phone")
        later = clock.advance(timedelta(minutes=5))

        async def seen_later() -> bool:
            return await fetch_value(db, "SELECT last_seen FROM notification_devices") == later
        await until(seen_later)
