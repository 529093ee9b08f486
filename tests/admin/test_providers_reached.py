"""The health check and the model listing reach a real (loopback) provider through the AI core
and the guarded fetcher: a live provider, a dead one, one without a model list, a wrong key;
and fetch-models refuses the metadata address given literally, through DNS and by redirect."""
from __future__ import annotations

from tests.admin.conftest import PROVIDER_KEY, error_of
from tests.admin.test_models import ADMIN_PREFIX, save_model, save_provider
from tests.support.servers import free_port


async def health_check(gateway, provider: str) -> dict:
    response = await gateway.post(f"{ADMIN_PREFIX}/health-check", headers=gateway.admin, json={"provider": provider})
    assert response.status == 200, await response.text()
    return await response.json()


async def test_health_check_of_a_live_provider(gateway, listing_provider):
    await save_provider(gateway, "live", f"{listing_provider.url}/live/v1")
    result = await health_check(gateway, "live")
    assert result["provider"] == "live" and result["message"]
    assert result["reachable"] is True and result["ok"] is True and result["status"] == 200
    assert result["method"] == "models" and result["models_count"] == 2 and result["error"] is None
    assert 0 <= result["latency_ms"] < 2000
    assert [(r["path"], r["authorization"]) for r in listing_provider.requests] == [
        ("/live/v1/models", f"Bearer {PROVIDER_KEY}")]
    assert PROVIDER_KEY not in str(result)


async def test_health_check_of_a_dead_provider(gateway):
    await save_provider(gateway, "dead", f"http://127.0.0.1:{free_port()}/v1")
    result = await health_check(gateway, "dead")
    assert result["reachable"] is False and result["ok"] is False and result["status"] is None
    assert result["error"] and "cannot be reached" in result["message"]
    assert result["latency_ms"] >= 0


async def test_health_check_with_a_wrong_key_reports_the_providers_error(gateway, listing_provider):
    await save_provider(gateway, "wrongkey", f"{listing_provider.url}/live/v1", api_key="sk-wrong-key-000000")
    result = await health_check(gateway, "wrongkey")
    assert result["reachable"] is True and result["ok"] is False and result["status"] == 401
    assert "Incorrect API key" in result["error"]


async def test_health_check_falls_back_to_a_one_token_completion(gateway, listing_provider):
    await save_provider(gateway, "nolist", f"{listing_provider.url}/nolist/v1")
    await save_model(gateway, "tiny", provider="nolist")
    result = await health_check(gateway, "nolist")
    assert result["ok"] is True and result["method"] == "completion"
    assert [r["path"] for r in listing_provider.requests] == ["/nolist/v1/chat/completions"]
    assert listing_provider.requests[0]["body"]["max_tokens"] == 1


async def test_health_check_refused_by_the_fetch_policy(make_gateway, listing_provider):
    gateway = await make_gateway(allow_private=False)
    await save_provider(gateway, "local", f"{listing_provider.url}/live/v1")
    result = await health_check(gateway, "local")
    assert result["reachable"] is False and result["error_kind"] == "refused"
    assert "allow_private" in result["error"]
    assert listing_provider.requests == []


async def test_health_check_of_an_unknown_provider(gateway):
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/health-check", headers=gateway.admin,
                                      json={"provider": "ghost"}), 404, "provider_not_found")
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/health-check", headers=gateway.admin, json={}),
                   400, "validation_error")


async def test_fetch_models_of_a_saved_provider_and_of_any_url(gateway, listing_provider):
    await save_provider(gateway, "live", f"{listing_provider.url}/live/v1")
    response = await gateway.get(f"{ADMIN_PREFIX}/fetch-models/live", headers=gateway.admin)
    body = await response.json()
    assert response.status == 200, body
    assert body["total"] == 2 and body["models"][0] == {"id": "gpt-small", "owned_by": "fake", "created": 1700000000}

    # An explicit URL on the provider's origin carries its key; the Ollama form is understood too.
    response = await gateway.get(f"{ADMIN_PREFIX}/fetch-models/live", headers=gateway.admin,
                                 params={"url": f"{listing_provider.url}/ollama/api/tags"})
    body = await response.json()
    assert [m["id"] for m in body["models"]] == ["llama3:8b", "qwen2:7b"]

    # Another origin (same server, other name) never receives the saved key.
    other = f"http://provider.test:{listing_provider.port}/live/v1/models"
    response = await gateway.get(f"{ADMIN_PREFIX}/fetch-models/live", headers=gateway.admin, params={"url": other})
    await error_of(response, 502, "provider_error")
    assert [r["authorization"] for r in listing_provider.requests] == [f"Bearer {PROVIDER_KEY}"] * 2 + [None]

    # A provider not saved yet can be listed (no key is sent).
    response = await gateway.get(f"{ADMIN_PREFIX}/fetch-models/newone", headers=gateway.admin,
                                 params={"url": f"{listing_provider.url}/ollama/api/tags"})
    assert (await response.json())["total"] == 2


async def test_fetch_models_refuses_the_metadata_address(gateway, listing_provider):
    for url in ("http://169.254.169.254/latest/meta-data/", "http://metadata.test/latest/meta-data/",
                f"{listing_provider.url}/moved/v1/models", "http://[::ffff:169.254.169.254]/"):
        response = await gateway.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=gateway.admin, params={"url": url})
        body = await error_of(response, 400, "url_not_allowed")
        assert "169.254.169.254" in body["error"]
    assert [r["path"] for r in listing_provider.requests] == ["/moved/v1/models"]


async def test_fetch_models_errors(make_gateway, listing_provider):
    gateway = await make_gateway(allow_private=False)
    await error_of(await gateway.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=gateway.admin,
                                     params={"url": f"{listing_provider.url}/ollama/api/tags"}), 400, "url_not_allowed")
    await error_of(await gateway.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=gateway.admin,
                                     params={"url": "file:///etc/passwd"}), 400, "validation_error")
    # An unclosed IPv6 bracket made urlsplit raise: a 500, here and in a provider's base_url.
    await error_of(await gateway.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=gateway.admin,
                                     params={"url": "http://[::1/"}), 400, "validation_error")
    await error_of(await gateway.post(f"{ADMIN_PREFIX}/providers/bracket", headers=gateway.admin,
                                      json={"name": "bracket", "base_url": "http://[::1/"}), 400, "validation_error")
    await error_of(await gateway.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=gateway.admin), 404, "provider_not_found")
    allowed = await make_gateway(allow_private=True)
    await error_of(await allowed.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=allowed.admin,
                                     params={"url": f"http://127.0.0.1:{free_port()}/v1/models"}),
                   502, "provider_unreachable")
    await error_of(await allowed.get(f"{ADMIN_PREFIX}/fetch-models/x", headers=allowed.admin,
                                     params={"url": f"{listing_provider.url}/text/v1/models"}),
                   502, "provider_bad_answer")
