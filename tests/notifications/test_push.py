"""POST /notifications/push: the spec's fields, and delivery to every device of the user on any
gateway instance (two real apps sharing Redis, the device connected to the second)."""
import asyncio
import re
import uuid

from gateway.app import create_app
from gateway.identity import Identity
from plugins.auth import tokens_plugin
from plugins.notifications import plugin as notifications_plugin
from tests.notifications.devices import DevicePlugin, bearer, nothing_arrives

API = "/api/v1"
ALICE = Identity("user_alice", "alice")
BOB = Identity("user_bob", "bob")
ADMIN = Identity("admin", "admin", is_admin=True)
SERVICE = {"Authorization": "Bearer test-service-token"}


async def gateway(aiohttp_client, config):
    app = create_app("gateway", config, plugins=[tokens_plugin, notifications_plugin, DevicePlugin()])
    return app, await aiohttp_client(app)


async def test_a_device_on_another_instance_receives_the_notification(aiohttp_client, make_config, redis_url,
                                                                      bus_prefix, database_url):
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix, "database.url": database_url}
    first_app, first = await gateway(aiohttp_client, make_config(shared))
    second_app, second = await gateway(aiohttp_client, make_config(shared))
    alice = bearer(first_app, ALICE)
    async with second.ws_connect("/ws/device?device=phone", headers=bearer(second_app, ALICE)) as phone, \
            second.ws_connect("/ws/device", headers=bearer(second_app, BOB)) as bob:
        await asyncio.sleep(0.05)
        response = await first.post(f"{API}/notifications/push", headers=alice, json={
            "user_id": "user_alice", "type": "reminder", "title": "喝水", "body": "该喝水了",
            "data": {"reminder_id": 7}})
        assert response.status == 200
        answer = await response.json()
        assert answer["success"] is True
        notification = answer["notification"]
        assert set(notification) == {"id", "type", "title", "user_id", "timestamp", "delivered"}
        assert notification["delivered"] is True and notification["user_id"] == "user_alice"
        assert str(uuid.UUID(notification["id"])) == notification["id"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", notification["timestamp"])
        frame = await phone.receive_json(timeout=3)
        assert frame["type"] == "notification" and isinstance(frame["timestamp"], int)
        assert frame["notification"] == {"id": notification["id"], "type": "reminder", "title": "喝水",
                                         "body": "该喝水了", "timestamp": notification["timestamp"],
                                         "data": {"reminder_id": 7}}
        await nothing_arrives(bob)
    await asyncio.sleep(0.05)
    response = await first.post(f"{API}/notifications/push", headers=alice, json={
        "user_id": "user_alice", "type": "info", "title": "t", "body": ""})
    assert (await response.json())["notification"]["delivered"] is False


async def test_who_may_push_to_whom_and_bad_bodies(aiohttp_client, config):
    app, client = await gateway(aiohttp_client, config)
    body = {"user_id": "user_bob", "type": "info", "title": "Hi", "body": "there"}
    response = await client.post(f"{API}/notifications/push", headers=bearer(app, ALICE), json=body)
    assert response.status == 403
    for headers in (bearer(app, ADMIN), SERVICE):
        response = await client.post(f"{API}/notifications/push", headers=headers, json=body)
        assert response.status == 200 and (await response.json())["notification"]["user_id"] == "user_bob"
    assert (await client.post(f"{API}/notifications/push", json=body)).status == 401
    for broken in ({**body, "type": "urgent"}, {k: v for k, v in body.items() if k != "title"},
                   {k: v for k, v in body.items() if k != "body"}, {**body, "data": [1]}, {**body, "title": 5}):
        response = await client.post(f"{API}/notifications/push", headers=bearer(app, ADMIN), json=broken)
        assert response.status == 400, broken
        assert (await response.json())["errorType"] == "validation_error"
