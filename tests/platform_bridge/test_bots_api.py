"""`/api/v1/bots`: configuration validated per platform, secrets masked, enable/disable, the
allow-list, link codes, and who may call."""
from __future__ import annotations

from gateway.app import create_app
from plugins.auth import tokens_plugin
from plugins.platform_bridge import plugin as bridge_plugin

SERVICE = {"Authorization": "Bearer test-service-token"}
TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


async def bridge_client(aiohttp_client, config):
    return await aiohttp_client(create_app("platform-bridge", config, plugins=[tokens_plugin, bridge_plugin]))


async def test_bots_round_trip_with_secrets_masked(aiohttp_client, config):
    client = await bridge_client(aiohttp_client, config)
    response = await client.post("/api/v1/bots", headers=SERVICE, json={
        "name": "Family", "platform": "telegram", "enabled": False,
        "config": {"bot_token": TOKEN, "mode": "webhook", "webhook_secret": "s3cret-token_value"},
        "users": [{"platform_user_id": "42", "user_id": "alice"}]})
    assert response.status == 201, await response.text()
    bot = await response.json()
    assert bot["config"] == {"bot_token": "••••Dsaw", "mode": "webhook", "webhook_secret": "••••alue"}
    assert bot["users"] == [{"platform_user_id": "42", "user_id": "alice", "linked_by": "allow_list"}]
    assert bot["status"] == {"state": "stopped", "error": None}
    assert bot["endpoints"] == {"telegram_webhook": f"/api/v1/platforms/telegram/{bot['id']}/webhook"}
    listed = await (await client.get("/api/v1/bots", headers=SERVICE)).json()
    assert [b["id"] for b in listed["bots"]] == [bot["id"]]
    assert TOKEN not in await (await client.get(f"/api/v1/bots/{bot['id']}", headers=SERVICE)).text()

    # A change to one field keeps the secrets; the platform cannot change.
    response = await client.patch(f"/api/v1/bots/{bot['id']}", headers=SERVICE,
                                  json={"name": "Family bot", "config": {"mode": "polling"}})
    assert response.status == 200, await response.text()
    changed = await response.json()
    assert changed["name"] == "Family bot" and changed["config"]["bot_token"] == "••••Dsaw"
    response = await client.patch(f"/api/v1/bots/{bot['id']}", headers=SERVICE, json={"platform": "discord"})
    assert response.status == 400
    response = await client.post(f"/api/v1/bots/{bot['id']}/disable", headers=SERVICE)
    assert (await response.json())["enabled"] is False

    assert (await client.delete(f"/api/v1/bots/{bot['id']}", headers=SERVICE)).status == 204
    response = await client.get(f"/api/v1/bots/{bot['id']}", headers=SERVICE)
    assert response.status == 404 and (await response.json())["errorType"] == "bot_not_found"


async def test_platform_fields_are_validated(aiohttp_client, config):
    client = await bridge_client(aiohttp_client, config)
    cases = [
        ("telegram", {"bot_token": "not-a-token"}, "bot_token"),
        ("telegram", {"bot_token": TOKEN, "mode": "webhook"}, "webhook_secret"),
        ("discord", {"application_id": "12", "public_key": "ab" * 32, "bot_token": "x" * 30}, "application_id"),
        ("discord", {"application_id": "123456789012345678", "public_key": "zz", "bot_token": "x" * 30},
         "public_key"),
        ("webhook", {"outgoing_url": "ftp://example.com/x", "signing_secret": "s" * 20}, "outgoing_url"),
        ("webhook", {"outgoing_url": "https://example.com/x", "signing_secret": "short"}, "signing_secret"),
    ]
    for platform, config_body, field in cases:
        response = await client.post("/api/v1/bots", headers=SERVICE,
                                     json={"name": "x", "platform": platform, "config": config_body})
        body = await response.json()
        assert response.status == 400, (platform, field)
        assert body["errorType"] == "validation_error" and f"config.{field}" in body["fields"], body
    response = await client.post("/api/v1/bots", headers=SERVICE, json={"name": "x", "platform": "irc", "config": {}})
    assert response.status == 400


async def test_only_the_service_or_the_administrator_configures(aiohttp_client, config):
    client = await bridge_client(aiohttp_client, config)
    assert (await client.get("/api/v1/bots")).status == 401
    assert (await client.get("/api/v1/bots", headers={"Authorization": "Bearer wrong"})).status == 401
