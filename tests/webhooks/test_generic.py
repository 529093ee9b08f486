"""POST /webhook/generic against the real AI core."""
import re

from tests.webhooks.conftest import WEBHOOK_KEY

URL = "/api/v1/webhook/generic"
KEY = {"X-Webhook-Key": WEBHOOK_KEY}


async def test_defaults_reply_and_the_stored_exchange(make_gateway, ai_core_url, provider):
    client, conversations = await make_gateway(ai_core_url)
    response = await client.post(URL, headers=KEY, json={"message": "你好，世界"})
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["reply"] == "echo(0 earlier): 你好，世界" and body["finish_reason"] == "stop"
    assert re.fullmatch(r"webhook_[a-z0-9]{12}", body["session_id"])
    session = await conversations.get_session("ext_webhook_generic", body["session_id"])
    assert session["user_id"] == "ext_webhook_generic"
    stored = await conversations.list_messages("ext_webhook_generic", body["session_id"])
    assert [(m["role"], m["content"]) for m in stored] == [("user", "你好，世界"), ("assistant", body["reply"])]
    assert body["message_id"] == str(stored[1]["id"])
    assert stored[0]["metadata"] == {"platform": "generic"}

    # the next message in the same session carries the history to the model
    response = await client.post(URL, headers=KEY, json={
        "message": "and again", "session_id": body["session_id"], "mode": "voice_msg", "platform": "slack"})
    assert (await response.json())["reply"] == "echo(2 earlier): and again"
    assert [m["content"] for m in provider.seen[-1]["messages"] if m["role"] != "system"] == [
        "你好，世界", "echo(0 earlier): 你好，世界", "and again"]


async def test_user_ids_get_the_external_prefix_and_cannot_enter_other_sessions(make_gateway, ai_core_url):
    client, conversations = await make_gateway(ai_core_url)
    response = await client.post(URL, headers=KEY, json={"message": "hi", "user_id": "crm", "session_id": "crm-1"})
    assert await conversations.get_session("ext_crm", "crm-1") is not None
    response = await client.post(URL, headers=KEY, json={"message": "hi", "user_id": "ext_crm", "session_id": "crm-1"})
    assert response.status == 200
    await conversations.create_session("admin", "private")
    # Session ids are per owner: `ext_admin` gets a `private` of its own, the administrator's stays untouched.
    response = await client.post(URL, headers=KEY, json={"message": "hi", "user_id": "admin", "session_id": "private"})
    assert response.status == 200
    assert await conversations.list_messages("admin", "private") == []
    assert len(await conversations.list_messages("ext_admin", "private")) == 2


async def test_key_and_body_errors(make_gateway, ai_core_url):
    client, _ = await make_gateway(ai_core_url)
    for headers in ({}, {"X-Webhook-Key": "wrong"}, {"X-Webhook-Key": WEBHOOK_KEY + "x"}):
        response = await client.post(URL, headers=headers, json={"message": "hi"})
        assert response.status == 401 and (await response.json())["errorType"] == "invalid_webhook_key"
    for body in ({"message": ""}, {"message": "   \n"}):
        response = await client.post(URL, headers=KEY, json=body)
        assert response.status == 400 and (await response.json())["errorType"] == "empty_message"
    for body in ({}, {"message": 5}, {"message": "hi", "mode": "video"}, {"message": "hi", "session_id": "a b"}):
        response = await client.post(URL, headers=KEY, json=body)
        assert response.status == 400 and (await response.json())["errorType"] == "validation_error", body


async def test_502_when_the_ai_core_is_down(make_gateway, closed_port_url):
    client, _ = await make_gateway(closed_port_url)
    response = await client.post(URL, headers=KEY, json={"message": "hello?"})
    assert response.status == 502
    body = await response.json()
    assert body["errorType"] == "ai_service_unavailable" and "AI_CORE_URL" in body["hint"]


async def test_a_message_past_the_limit_is_413_before_any_session_or_turn(make_gateway, ai_core_url, provider):
    client, conversations = await make_gateway(ai_core_url)
    response = await client.post(URL, headers=KEY, json={"message": "x" * 100_000, "session_id": "long-1"})
    body = await response.json()
    assert response.status == 413 and body["errorType"] == "message_too_long" and "webhooks" in body["hint"]
    assert await conversations.get_session("ext_webhook_generic", "long-1") is None and provider.seen == []

    # The chat's own bound holds for every text handed in as a turn, whatever the door allows.
    client, _ = await make_gateway(ai_core_url, **{"plugins.webhooks": {"max_message_chars": 200_000}})
    response = await client.post(URL, headers=KEY, json={"message": "x" * 100_000, "session_id": "long-2"})
    body = await response.json()
    assert response.status == 413 and body["errorType"] == "message_too_long" and "plugins.chat" in body["hint"]
    assert provider.seen == []
