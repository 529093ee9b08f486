"""Providers, models and routing rules through the admin API, kept by the real AI core:
saving, listing, deleting, masking of keys, validation of every field, and the AI core seeing
each change on its next request."""
from __future__ import annotations

import logging

import pytest

from gateway.context import get_context

from tests.admin.conftest import PROVIDER_KEY, error_of
from tests.support.servers import free_port

ADMIN_PREFIX = "/api/v1/admin/models"


async def save_provider(gateway, name="openai", base_url="https://api.example.com/v1", api_key=PROVIDER_KEY):
    response = await gateway.post(f"{ADMIN_PREFIX}/providers/{name}", headers=gateway.admin,
                                  json={"name": name, "base_url": base_url, "api_key": api_key})
    assert response.status == 200, await response.text()
    assert await response.json() == {"status": "saved", "name": name}


async def save_model(gateway, model_id="gpt-small", provider="openai", **fields):
    body = {"name": model_id, "provider": provider, **fields}
    response = await gateway.post(f"{ADMIN_PREFIX}/models/{model_id}", headers=gateway.admin, json=body)
    assert response.status == 200, await response.text()
    assert await response.json() == {"status": "saved", "id": model_id}


async def test_providers_are_saved_listed_masked_and_deleted(gateway, caplog):
    caplog.set_level(logging.DEBUG)
    await save_provider(gateway)
    listed = await (await gateway.get(f"{ADMIN_PREFIX}/providers", headers=gateway.admin)).json()
    assert listed == {"providers": [{"name": "openai", "base_url": "https://api.example.com/v1",
                                     "api_key": "****" + PROVIDER_KEY[-4:], "has_api_key": True}], "total": 1}

    # The masked key sent back unchanged keeps the stored key, with a new path on the same origin...
    masked = "****" + PROVIDER_KEY[-4:]
    response = await gateway.post(f"{ADMIN_PREFIX}/providers/openai", headers=gateway.admin,
                                  json={"base_url": "https://api.example.com/v2/", "api_key": masked})
    assert response.status == 200
    listed = await (await gateway.get(f"{ADMIN_PREFIX}/providers", headers=gateway.admin)).json()
    assert listed["providers"][0]["base_url"] == "https://api.example.com/v2"
    assert listed["providers"][0]["api_key"] == masked
    # ... but the key does not follow the provider to another host unless it is sent again.
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/providers/openai", headers=gateway.admin,
                                      json={"base_url": "https://api2.example.com/v1/", "api_key": masked}),
                   400, "api_key_required")

    # A short key is masked entirely; an empty one is shown as none.
    await save_provider(gateway, "local", "http://127.0.0.1:11434/v1", "short")
    await save_provider(gateway, "nokey", "http://10.0.0.5:8000/v1", "")
    listed = {p["name"]: p for p in (await (await gateway.get(f"{ADMIN_PREFIX}/providers",
                                                             headers=gateway.admin)).json())["providers"]}
    assert listed["local"]["api_key"] == "****" and listed["nokey"] == {
        "name": "nokey", "base_url": "http://10.0.0.5:8000/v1", "api_key": "", "has_api_key": False}

    response = await gateway.delete(f"{ADMIN_PREFIX}/providers/local", headers=gateway.admin)
    assert await response.json() == {"status": "deleted", "name": "local"}
    await error_of(await gateway.delete(f"{ADMIN_PREFIX}/providers/local", headers=gateway.admin),
                   404, "provider_not_found")
    assert all(PROVIDER_KEY not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("body, field", [
    ({"base_url": "ftp://api.example.com/v1"}, "base_url"),
    ({"base_url": "file:///etc/passwd"}, "base_url"),
    ({"base_url": "api.example.com/v1"}, "base_url"),
    ({"base_url": "http://user:pw@api.example.com/v1"}, "base_url"),
    ({"base_url": "http://api.example.com:port/v1"}, "base_url"),
    ({}, "base_url"),
    ({"base_url": "https://api.example.com", "api_key": "sk with space"}, "api_key"),
    ({"base_url": "https://api.example.com", "api_key": 12}, "api_key"),
    ({"base_url": "https://api.example.com", "colour": "red"}, "colour"),
])
async def test_provider_validation(gateway, body, field):
    error = await error_of(await gateway.post(f"{ADMIN_PREFIX}/providers/p1", headers=gateway.admin, json=body),
                           400, "validation_error")
    assert field in error["error"] and set(error) <= {"error", "errorType", "hint", "fields"}


async def test_provider_name_in_path_and_body(gateway):
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/providers/p1", headers=gateway.admin,
                                      json={"name": "p2", "base_url": "https://x.example"}), 400, "validation_error")
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/providers/-bad", headers=gateway.admin,
                                      json={"base_url": "https://x.example"}), 400, "validation_error")
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/providers/p1", headers=gateway.admin, data=b"{nope"),
                   400, "invalid_json")


async def test_models_are_saved_validated_and_seen_by_the_ai_core(gateway):
    await save_provider(gateway)
    await save_model(gateway, "gpt-small", priority=5, tags=["chat", "fast"], description="small one",
                     params={"temperature": 0.3, "max_tokens": 256, "seed": 7})
    models = await (await gateway.get(f"{ADMIN_PREFIX}/models", headers=gateway.admin)).json()
    assert models["total"] == 1
    model = models["models"][0]
    assert {k: model[k] for k in ("id", "name", "provider", "description", "priority", "tags", "params", "enabled")} == {
        "id": "gpt-small", "name": "gpt-small", "provider": "openai", "description": "small one", "priority": 5,
        "tags": ["chat", "fast"], "params": {"temperature": 0.3, "max_tokens": 256, "seed": 7}, "enabled": True}
    assert model["updated_at"]

    # A listed model sent back as it is (with updated_at) is accepted: replace, not create.
    response = await gateway.post(f"{ADMIN_PREFIX}/models/gpt-small", headers=gateway.admin,
                                  json={**model, "enabled": False})
    assert response.status == 200, await response.text()
    models = await (await gateway.get(f"{ADMIN_PREFIX}/models", headers=gateway.admin)).json()
    assert models["models"][0]["enabled"] is False

    response = await gateway.delete(f"{ADMIN_PREFIX}/models/gpt-small", headers=gateway.admin)
    assert await response.json() == {"status": "deleted", "id": "gpt-small"}
    await error_of(await gateway.delete(f"{ADMIN_PREFIX}/models/gpt-small", headers=gateway.admin),
                   404, "model_not_found")


@pytest.mark.parametrize("body, field", [
    ({"priority": -1}, "priority"),
    ({"priority": "high"}, "priority"),
    ({"priority": 1.5}, "priority"),
    ({"provider": "nobody"}, "provider"),
    ({"name": ""}, "name"),
    ({"tags": "chat"}, "tags"),
    ({"tags": [""]}, "tags"),
    ({"params": {"temperature": 3}}, "temperature"),
    ({"params": {"temperature": "hot"}}, "temperature"),
    ({"params": {"temperature": 10**309}}, "temperature"),  # math.isfinite raised OverflowError: a 500
    ({"params": {"top_p": -0.1}}, "top_p"),
    ({"params": {"max_tokens": 0}}, "max_tokens"),
    ({"params": {"max_tokens": 10.5}}, "max_tokens"),
    ({"params": []}, "params"),
    ({"enabled": "maybe"}, "enabled"),
    ({"description": 5}, "description"),
    ({"id": "other"}, "id"),
    ({"unknown_field": 1}, "unknown_field"),
])
async def test_model_validation(gateway, body, field):
    await save_provider(gateway)
    payload = {"name": "m1", "provider": "openai", **body}
    error = await error_of(await gateway.post(f"{ADMIN_PREFIX}/models/m1", headers=gateway.admin, json=payload),
                           400, "validation_error")
    assert field in error["error"]
    models = await (await gateway.get(f"{ADMIN_PREFIX}/models", headers=gateway.admin)).json()
    assert models["total"] == 0


async def test_routing_rules_and_references(gateway):
    await save_provider(gateway)
    await save_model(gateway, "gpt-small")
    await save_model(gateway, "gpt-large", priority=10)
    response = await gateway.post(f"{ADMIN_PREFIX}/routing/chat", headers=gateway.admin,
                                  json={"purpose": "chat", "fallback_chain": ["gpt-large", "gpt-small"], "required": True})
    assert await response.json() == {"status": "saved", "purpose": "chat"}
    rules = await (await gateway.get(f"{ADMIN_PREFIX}/routing", headers=gateway.admin)).json()
    assert rules == [{"purpose": "chat", "fallback_chain": ["gpt-large", "gpt-small"], "required": True}]

    # Things still referenced cannot be deleted out from under the rule or the models.
    await error_of(await gateway.delete(f"{ADMIN_PREFIX}/models/gpt-small", headers=gateway.admin), 409, "model_in_use")
    await error_of(await gateway.delete(f"{ADMIN_PREFIX}/providers/openai", headers=gateway.admin),
                   409, "provider_in_use")

    response = await gateway.delete(f"{ADMIN_PREFIX}/routing/chat", headers=gateway.admin)
    assert await response.json() == {"status": "deleted", "purpose": "chat"}
    await error_of(await gateway.delete(f"{ADMIN_PREFIX}/routing/chat", headers=gateway.admin), 404, "route_not_found")
    assert await (await gateway.get(f"{ADMIN_PREFIX}/routing", headers=gateway.admin)).json() == []


@pytest.mark.parametrize("body, field", [
    ({"fallback_chain": ["gpt-small", "ghost"]}, "ghost"),
    ({"fallback_chain": []}, "fallback_chain"),
    ({"fallback_chain": "gpt-small"}, "fallback_chain"),
    ({"fallback_chain": ["gpt-small", "gpt-small"]}, "more than once"),
    ({"fallback_chain": ["gpt-small"], "required": "yes please"}, "required"),
    ({"fallback_chain": ["gpt-small"], "purpose": "vision"}, "purpose"),
    ({}, "fallback_chain"),
])
async def test_routing_validation(gateway, body, field):
    await save_provider(gateway)
    await save_model(gateway, "gpt-small")
    error = await error_of(await gateway.post(f"{ADMIN_PREFIX}/routing/chat", headers=gateway.admin, json=body),
                           400, "validation_error")
    assert field in error["error"]
    assert await (await gateway.get(f"{ADMIN_PREFIX}/routing", headers=gateway.admin)).json() == []


async def test_the_ai_core_routes_by_the_new_tables_at_once(gateway):
    """A chain saved through the admin API is the one the AI core's next chat call walks."""
    await save_provider(gateway, "dead", f"http://127.0.0.1:{free_port()}/v1")
    await save_model(gateway, "dead-model", provider="dead")
    response = await gateway.post(f"{ADMIN_PREFIX}/routing/chat", headers=gateway.admin,
                                  json={"fallback_chain": ["dead-model"], "required": True})
    assert response.status == 200
    ai_core_url = get_context(gateway.app).config.get("peers.ai_core_url")
    service = {"Authorization": "Bearer test-service-token"}
    async with gateway.session.post(f"{ai_core_url}/api/v1/chat/stream", headers=service,
                                    json={"user_id": "user_alice", "text": "hello"}) as answer:
        text = await answer.text()
    assert "dead-model" in text and "error" in text
    async with gateway.session.get(f"{ai_core_url}/v1/models", headers=service) as answer:
        ids = [m["id"] for m in (await answer.json())["data"]]
    assert "dead-model" in ids


async def test_an_unreachable_ai_core_is_a_502(make_gateway):
    gateway = await make_gateway(ai_core_url=f"http://127.0.0.1:{free_port()}")
    await error_of(await gateway.get(f"{ADMIN_PREFIX}/providers", headers=gateway.admin), 502, "ai_core_unreachable")
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/health-check", headers=gateway.admin,
                                      json={"provider": "x"}), 502, "ai_core_unreachable")
