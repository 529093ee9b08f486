"""What the fuzzer (test_fuzz.py) found on one route each, kept as plain tests that fail without
their fix. Findings that apply to every route are in tests/system/test_hostile_input.py."""
from __future__ import annotations

import json

import aiohttp
import jsonschema
import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from gateway.openapi import build_document
from gateway.services import get_service
from plugins.auth.contract import TOKENS


@pytest.fixture
async def ai_core(aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url})
    client = await aiohttp_client(create_app("ai-core", config, spec=get_service("ai-core")))
    client.peer = {"Authorization": f"Bearer {config.get('auth.service_token')}"}
    return client


@pytest.mark.parametrize("api_key", ["sk-\nInjected: yes", "sk-\r\n", "sk-\x01", "sk- spaced"])
async def test_a_provider_key_that_cannot_be_a_header_is_refused(ai_core, api_key):
    """The key travels as `Authorization: Bearer <key>`; one with a line break was stored, and
    every later probe or model call with it raised in aiohttp's header writer: a 500."""
    response = await ai_core.post("/api/v1/models/providers/bad", headers=ai_core.peer,
                                  json={"base_url": "http://127.0.0.1:9/v1", "api_key": api_key})
    assert response.status == 400, await response.text()
    assert (await response.json())["errorType"] == "validation_error"
    response = await ai_core.post("/api/v1/models/providers/bad/probe", headers=ai_core.peer, json={})
    assert response.status == 404  # nothing was stored


async def test_the_chat_stream_events_fit_the_document(ai_core):
    """The document described the `text/event-stream` answer as a string; clients (and
    schemathesis) read that schema one event at a time, `{"event", "data"}`."""
    document = await (await ai_core.get("/api/v1/openapi.json")).json()
    declared = document["paths"]["/api/v1/chat/stream"]["post"]["responses"]["200"]["content"]
    schema = declared["text/event-stream"]["schema"]
    response = await ai_core.post("/api/v1/chat/stream", headers=ai_core.peer,  # no model: the offline agent
                                  json={"user_id": "user_alice", "text": "hello"})
    assert response.status == 200
    events = []
    for block in (await response.text()).strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append(fields)
    assert [event["event"] for event in events][-1] == "done"
    for event in events:
        jsonschema.validate(event, schema)
        jsonschema.validate(json.loads(event["data"]), schema["properties"]["data"]["contentSchema"])


async def test_the_chat_channel_asks_for_a_credential_before_it_judges_the_origin(aiohttp_client, make_config,
                                                                                   database_url):
    """Without a credential the handshake is a 401 whatever the Origin (it was a 403
    `origin_not_allowed`); with one, a foreign Origin is still refused."""
    config = make_config({"database.url": database_url,
                          "plugins": {"chat": {"allowed_origins": ["https://app.example"]}}})
    app = create_app("gateway", config, spec=get_service("gateway"))
    gateway = await aiohttp_client(app)
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(Identity("admin", "admin", is_admin=True))
    foreign = {"Origin": "https://evil.example"}
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect("/ws/chat?session_id=origin-order", headers=foreign)
    assert refused.value.status == 401
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect(f"/ws/chat?session_id=origin-order&token={token}", headers=foreign)
    assert refused.value.status == 403


@pytest.mark.parametrize("service_id", ["gateway", "ai-core"])
def test_every_operation_documents_the_431_of_an_over_long_request(service_id, make_config):
    """The services answer a request line or headers over aiohttp's limits with 431 whatever the
    path (gateway.serving.ServiceRunner); the document did not say so, and the fuzzer's long query
    strings got an undocumented status."""
    app = create_app(service_id, make_config(), spec=get_service(service_id))
    document = build_document(app, service_id, "test")
    missing = [f"{method.upper()} {path}" for path, operations in document["paths"].items()
               for method, operation in operations.items() if "431" not in operation["responses"]]
    assert missing == []


def test_the_console_proxies_document_whatever_status_their_service_answers(make_config):
    """A proxy passes on the service's own status (a 404 of an unknown id, a 409, a 422); the
    console's document listed only 200 and its own errors, and the fuzzer's proxied 404s were
    undocumented statuses. Each proxy operation now has a `default` answer: the service's."""
    from console.app import create_console_app
    from gateway.openapi import _PARAMETER

    app = create_console_app(make_config(), specs=[])
    document = build_document(app, "console", "test")
    proxies = [(route.method.lower(), _PARAMETER.sub(r"{\1}", route.resource.canonical))
               for route in app.router.routes()
               if route.resource is not None and route.method != "HEAD"
               and (route.handler.__name__.startswith("proxy_") or route.handler.__name__ == "service_health")]
    assert len(proxies) > 20
    missing = [f"{method.upper()} {path}" for method, path in proxies
               if "default" not in document["paths"][path][method]["responses"]]
    assert missing == []
