"""The one rule of who may chat (docs/chat.md, "Who may chat") at the webhooks plugin's doors:
the platform bridge's `POST /api/v1/bridge/turns` runs no turn for a person who may not chat (a
plain 403 before any stream, nothing stored), and does for the administrator and, with
`[auth] chat_for_all_users`, for everyone. The operator's own webhooks answer their outside
(`ext_`) senders whatever the rule, since those are no accounts and the key is the operator's."""
from __future__ import annotations

import json

import pytest

from tests.webhooks.conftest import WEBHOOK_KEY

SERVICE = {"Authorization": "Bearer test-service-token"}


def turn(user_id: str) -> dict:
    return {"user_id": user_id, "session_id": "tg_1", "text": "hello", "platform": "telegram"}


async def done_event(response) -> dict:
    assert response.status == 200, await response.text()
    events = [json.loads(line[len(b"data: "):]) async for line in response.content if line.startswith(b"data: ")]
    assert events[-1]["type"] == "done", events
    return events[-1]


async def test_the_bridge_route_refuses_a_person_who_may_not_chat(make_gateway, ai_core_url, provider):
    client, conversations = await make_gateway(ai_core_url)  # chat limited to the administrator (the default)
    response = await client.post("/api/v1/bridge/turns", json=turn("user_bob"), headers=SERVICE)
    assert response.status == 403 and response.content_type == "application/json"
    body = await response.json()
    assert body["errorType"] == "admin_only" and "administrator" in body["error"] and body["hint"]
    assert provider.seen == [] and await conversations.get_session("user_bob", "tg_1") is None

    done = await done_event(await client.post("/api/v1/bridge/turns", json=turn("admin"), headers=SERVICE))
    assert done["text"] == "echo(0 earlier): hello"
    # The operator's generic webhook still answers its outside senders.
    response = await client.post("/api/v1/webhook/generic", headers={"X-Webhook-Key": WEBHOOK_KEY},
                                 json={"message": "hi", "user_id": "crm"})
    assert response.status == 200 and (await response.json())["reply"] == "echo(0 earlier): hi"


@pytest.mark.parametrize("user_id", ["user_bob", "admin"])
async def test_with_chat_for_all_users_everyone_may_chat_through_the_bridge(make_gateway, ai_core_url, user_id):
    client, _ = await make_gateway(ai_core_url, **{"auth.chat_for_all_users": True})
    done = await done_event(await client.post("/api/v1/bridge/turns", json=turn(user_id), headers=SERVICE))
    assert done["text"] == "echo(0 earlier): hello"
