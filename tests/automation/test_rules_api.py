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
