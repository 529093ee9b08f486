"""A message from the assistant to a person's linked chat-platform accounts, unasked: the
bridge's `POST /api/v1/users/{user_id}/messages` (service credential), and a reminder fired by
the gateway (auth, notifications, reminders, the scheduler's manual clock) arriving in the
person's Telegram chat with the bot (tests/support/fake_telegram.py)."""
from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from gateway.clock import ManualClock
from tests.notifications.devices import bearer
from tests.platform_bridge.conftest import SERVICE
from tests.reminders.conftest import ALICE as ALICE_IDENTITY
from tests.reminders.conftest import API, AUTH, START, build_app, register

ALICE = 4242


async def test_the_bridge_sends_a_message_to_each_linked_account_with_the_service_credential(make_bridge, telegram):
    bridge = await make_bridge()
    bot = await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": "alice"}])
    answer = await bridge.client.post("/api/v1/users/alice/messages", headers=SERVICE, json={"text": "Dinner at 7"})
    assert answer.status == 200, await answer.text()
    assert await answer.json() == {"sent": 1, "deliveries": [
        {"bot_id": bot["id"], "platform": "telegram", "platform_user_id": str(ALICE), "error": None}]}
    assert telegram.texts(ALICE) == ["Dinner at 7"]
    entries = await bridge.log(bot["id"])
    assert [(e["direction"], e["text"], e["user_id"]) for e in entries] == [("out", "Dinner at 7", "alice")]

    # Nobody linked: nothing sent. A disabled bot sends nothing either.
    answer = await bridge.client.post("/api/v1/users/bob/messages", headers=SERVICE, json={"text": "hi"})
    assert await answer.json() == {"sent": 0, "deliveries": []}
    await bridge.client.post(f"/api/v1/bots/{bot['id']}/disable", headers=SERVICE)
    answer = await bridge.client.post("/api/v1/users/alice/messages", headers=SERVICE, json={"text": "again"})
    assert (await answer.json())["deliveries"] == []

    # Telegram refusing (the person blocked the bot) is said per account, not a failure of the call.
    await bridge.client.post(f"/api/v1/bots/{bot['id']}/enable", headers=SERVICE)
    telegram.fail("sendMessage", 403)
    answer = await bridge.client.post("/api/v1/users/alice/messages", headers=SERVICE, json={"text": "blocked"})
    [delivery] = (await answer.json())["deliveries"]
    assert delivery["error"] and "403" in delivery["error"]


async def test_only_the_service_credential_or_the_administrator_sends_and_the_text_is_checked(make_bridge, telegram):
    bridge = await make_bridge()
    answer = await bridge.client.post("/api/v1/users/alice/messages", json={"text": "hi"})
    assert answer.status == 401
    answer = await bridge.client.post("/api/v1/users/alice/messages", headers=SERVICE, json={"text": ""})
    body = await answer.json()
    assert answer.status == 400 and body["errorType"] == "validation_error" and "text" in body["fields"]


async def test_a_fired_reminder_reaches_the_persons_linked_telegram_account(make_bridge, telegram, make_config,
                                                                            database_url):
    bridge = await make_bridge()
    await bridge.add_bot(users=[{"platform_user_id": str(ALICE), "user_id": ALICE_IDENTITY.user_id}])
    bridge_url = str(bridge.client.make_url("")).rstrip("/")
    clock = ManualClock(START)
    config = make_config({"database.url": database_url, **AUTH, "peers.platform_bridge_url": bridge_url,
                          "plugins.reminders": {"grace_seconds": 3600}})
    gateway = TestClient(TestServer(build_app(config, clock)))
    await gateway.start_server()
    try:
        await register(gateway, "alice")
        response = await gateway.post(f"{API}/reminders", headers=bearer(gateway.server.app, ALICE_IDENTITY),
                                      json={"title": "Call mom", "description": "She is back from Paris",
                                            "remind_at": "2026-11-24T14:00:30+08:00"})
        assert response.status == 201, await response.text()
        clock.advance(30)
        texts = await telegram.wait_for_texts(ALICE, 1)
        assert texts == ["⏰ Call mom\nShe is back from Paris"]
    finally:
        await gateway.close()
