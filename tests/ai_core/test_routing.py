"""Routing and fallback: each failure kind before the first token moves on to the next model,
a failure after tokens ends the turn with an error event, edits apply without a restart, and
nothing answers without a credential."""
import time

import pytest

from tests.ai_core.conftest import ADMIN, ALICE, SERVICE, access_token, bearer, configure, read_events, text_of


async def chat(client, text="hello there", headers=SERVICE, **extra):
    body = {"user_id": "user_alice", "session_id": "s1", "text": text, **extra}
    return await read_events(await client.post("/api/v1/chat/stream", json=body, headers=headers))


@pytest.mark.parametrize("failure", ["refused", "stalled", "ratelimited", "broken"])
async def test_a_model_failing_before_its_first_token_falls_back(ai_core, provider, failure):
    await configure(ai_core, provider, {"first": failure, "second": "ok"}, chain=["first", "second"])
    started = time.monotonic()
    events = await chat(ai_core)
    done = events[-1]
    assert done["type"] == "done"
    assert done["model"] == "second" and done["finish_reason"] == "stop"
    assert done["text"] == text_of(events) == "Hello from upstream-second."
    expected_kind = {"refused": "connection", "stalled": "timeout", "ratelimited": "rate_limited",
                     "broken": "server_error"}[failure]
    assert [(f["model"], f["kind"]) for f in done["fallbacks"]] == [("first", expected_kind)]
    assert time.monotonic() - started < 5
    # The provider's key went to the provider, and only there.
    assert provider.requests[-1]["authorization"] == "Bearer key-second"


async def test_a_failure_after_tokens_ends_the_turn_with_an_error(ai_core, provider):
    await configure(ai_core, provider, {"first": "dies", "second": "ok"}, chain=["first", "second"])
    events = await chat(ai_core)
    assert text_of(events) == "Partial answer"
    assert events[-1]["type"] == "error" and events[-1]["model"] == "first"
    assert events[-1]["errorType"] == "model_failed"
    assert not any(e["type"] == "done" for e in events)
    assert [r["behaviour"] for r in provider.requests] == ["dies"]  # no silent switch mid-answer


async def test_a_required_route_whose_models_all_fail_reports_an_error(ai_core, provider):
    await configure(ai_core, provider, {"first": "broken", "second": "ratelimited"},
                    chain=["first", "second"], required=True)
    events = await chat(ai_core)
    assert [e["type"] for e in events] == ["error"]
    assert events[0]["errorType"] == "all_models_failed"
    assert "first" in events[0]["error"] and "second" in events[0]["error"]


@pytest.mark.parametrize("text", ["what time is it", "tell me a story about dragons"])
async def test_an_optional_route_whose_models_all_fail_hands_over_to_the_offline_agent(ai_core, provider, text):
    """The person is told the model is unavailable before the offline agent's answer, once,
    whether or not the agent understood the question."""
    await configure(ai_core, provider, {"first": "broken"}, chain=["first"])
    events = await chat(ai_core, text=text)
    notices = [e for e in events if e["type"] == "system_info"]
    assert notices == [{"type": "system_info", "level": "warning", "action": "retry",
                        "message": "The language model is unavailable right now, so the built-in offline "
                                   "assistant answers instead; try again in a moment."}]
    assert events.index(notices[0]) < min(i for i, e in enumerate(events) if e["type"] == "delta")
    assert events[-1]["model"] == "offline-agent"
    assert events[-1]["fallbacks"][0]["model"] == "first"


async def test_routing_edits_apply_on_the_next_request(ai_core, provider):
    await configure(ai_core, provider, {"alpha": "ok", "beta": "ok"}, chain=["alpha"])
    assert (await chat(ai_core))[-1]["model"] == "alpha"
    await configure(ai_core, provider, {}, chain=["beta", "alpha"])
    assert (await chat(ai_core))[-1]["model"] == "beta"
    # Disabling a model takes it out of every chain at once.
    response = await ai_core.post("/api/v1/models/models/beta", headers=ADMIN, json={
        "name": "upstream-beta", "provider": "p-beta", "enabled": False})
    assert response.status == 200
    assert (await chat(ai_core))[-1]["model"] == "alpha"
    assert (await ai_core.delete("/api/v1/models/routing/chat", headers=ADMIN)).status == 200
    # Without a rule, the enabled models are tried by priority.
    assert (await chat(ai_core))[-1]["model"] == "alpha"


async def test_without_any_model_the_offline_agent_answers(ai_core, provider):
    events = await chat(ai_core, text="what is the weather like")
    # A person (not the administrator) is told to ask the administrator, in the reply itself.
    assert not any(e["type"] == "system_info" for e in events)
    assert "your administrator can connect a language model" in events[-1]["text"]
    assert events[-1]["model"] == "offline-agent" and events[-1]["finish_reason"] == "no_model"
    assert provider.requests == []


async def test_model_tables_round_trip_with_masked_keys(ai_core, provider):
    await configure(ai_core, provider, {"alpha": "ok"}, chain=["alpha"], required=True)
    providers = await (await ai_core.get("/api/v1/models/providers", headers=ADMIN)).json()
    assert providers == {"providers": [{"name": "p-alpha", "base_url": f"{provider.url}/ok/v1",
                                        "api_key": "****" + "key-alpha"[-4:]}], "total": 1}
    # Saving back what the list showed keeps the real key.
    response = await ai_core.post("/api/v1/models/providers/p-alpha", headers=ADMIN,
                                  json=providers["providers"][0])
    assert await response.json() == {"status": "saved", "name": "p-alpha"}
    await chat(ai_core)
    assert provider.requests[-1]["authorization"] == "Bearer key-alpha"
    # The stored key does not follow the provider to another address unless it is sent again.
    moved = {**providers["providers"][0], "base_url": "https://elsewhere.example/v1"}
    response = await ai_core.post("/api/v1/models/providers/p-alpha", headers=ADMIN, json=moved)
    assert response.status == 400 and (await response.json())["errorType"] == "api_key_required"
    same_origin = {**providers["providers"][0], "base_url": f"{provider.url}/ok/v1/"}
    assert (await ai_core.post("/api/v1/models/providers/p-alpha", headers=ADMIN, json=same_origin)).status == 200
    models = await (await ai_core.get("/api/v1/models/models", headers=ADMIN)).json()
    assert models["total"] == 1
    model = models["models"][0]
    assert {k: model[k] for k in ("id", "name", "provider", "priority", "tags", "params", "enabled")} == {
        "id": "alpha", "name": "upstream-alpha", "provider": "p-alpha", "priority": 0, "tags": ["chat"],
        "params": {}, "enabled": True}
    assert model["updated_at"]
    assert await (await ai_core.get("/api/v1/models/routing", headers=ADMIN)).json() == [
        {"purpose": "chat", "fallback_chain": ["alpha"], "required": True}]
    assert (await ai_core.delete("/api/v1/models/models/nope", headers=ADMIN)).status == 404
    response = await ai_core.post("/api/v1/models/routing/chat", headers=ADMIN, json={"fallback_chain": "x"})
    assert response.status == 400 and (await response.json())["errorType"] == "validation_error"
    response = await ai_core.post("/api/v1/models/providers/x", headers=ADMIN, json={"base_url": "ftp://x"})
    assert response.status == 400


async def test_every_endpoint_requires_a_credential(ai_core):
    for method, path in [("POST", "/api/v1/chat/stream"), ("POST", "/v1/chat/completions"),
                         ("GET", "/v1/models"), ("GET", "/api/v1/tools"), ("GET", "/api/v1/tools/calls"),
                         ("GET", "/api/v1/tools/calls/stats"), ("GET", "/api/v1/models/providers"),
                         ("GET", "/api/v1/models/models"), ("GET", "/api/v1/models/routing"),
                         ("POST", "/api/v1/vision/describe")]:
        response = await ai_core.request(method, path, json={})
        assert response.status == 401, (method, path)
        response = await ai_core.request(method, path, json={},
                                         headers=bearer(access_token(typ="refresh")))
        assert response.status == 401, (method, path)
    for path in ["/api/v1/tools/calls", "/api/v1/tools/calls/stats", "/api/v1/models/providers",
                 "/api/v1/models/routing"]:
        assert (await ai_core.get(path, headers=ALICE)).status == 403
    # A service must say which user it acts for; a person may not act for another.
    response = await ai_core.post("/api/v1/chat/stream", headers=SERVICE, json={"text": "hi"})
    assert response.status == 400
    response = await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={"text": "hi", "user_id": "admin"})
    assert response.status == 403


async def test_an_edit_reaches_every_instance_sharing_the_bus(make_ai_core, provider, redis_url, bus_prefix):
    """The routing tables are kept in memory (issue 44); an edit on one instance is seen by the
    next request of another sharing the database and Redis, with no restart."""
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first, second = await make_ai_core(overrides=shared), await make_ai_core(overrides=shared)
    await configure(first, provider, {"one": "ok", "two": "ok"}, chain=["one"])
    assert (await chat(second))[-1]["model"] == "one"  # read once, kept
    await configure(first, provider, {}, chain=["two"])
    for _ in range(50):  # the announcement crosses Redis
        if (await chat(second))[-1]["model"] == "two":
            break
    else:
        raise AssertionError("the second instance kept the old chain")
    response = await first.delete("/api/v1/models/models/two", headers=SERVICE)
    assert response.status == 200
    assert (await chat(first))[-1]["model"] == "offline-agent"  # this instance: at once
