"""The OpenAPI document of every service of conf/services.toml and of the console, as their
factories build them: valid OpenAPI 3.1, every route documented, every success answer described.
A plugin added later fails here until its routes declare `api_doc`."""
from __future__ import annotations

import io

import aiohttp
import jsonschema
import pytest
from openapi_spec_validator import validate
from PIL import Image

from console.app import create_console_app
from gateway.app import create_app
from gateway.context import get_context
from gateway.openapi import build_document, undocumented
from gateway.services import ServiceSpec, get_service, load_services
from plugins.sessions.contract import CONVERSATIONS
from tests.support.servers import free_port

SERVICES = [spec.id for spec in load_services()]
# Answers without a body, and answers whose body is not JSON (they declare their media type).
NO_BODY = {"101", "204", "304"}
# Accepted may carry a body or none (the MCP transport's answer to a notification has none).
MAYBE_BODY = {"202"}


def missing_answers(document: dict) -> list[str]:
    """Each success answer that does not say what it carries."""
    problems = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            successes = [status for status in operation["responses"] if status[0] in "123"]
            if not successes:
                problems.append(f"{where}: no success answer")
            for status in successes:
                content = operation["responses"][status].get("content")
                if status in NO_BODY:
                    if content:
                        problems.append(f"{where} {status}: a body on a bodiless answer")
                elif not content and status not in MAYBE_BODY:
                    problems.append(f"{where} {status}: no media type or schema")
                elif content and any(not entry.get("schema") for entry in content.values()):
                    problems.append(f"{where} {status}: a media type without a schema")
    return problems


def undescribed_errors(document: dict) -> list[str]:
    """Each error answer that is not the spec's error body."""
    return [f"{method.upper()} {path} {status}"
            for path, operations in document["paths"].items() for method, operation in operations.items()
            for status, answer in operation["responses"].items()
            if status[0] in "45" and answer.get("content", {}).get("application/json", {}).get("schema")
            != {"$ref": "#/components/schemas/ErrorBody"}]


def check(document: dict) -> None:
    validate(document)
    assert document["openapi"] == "3.1.0"
    assert undocumented(document) == [], "routes without api_doc"
    assert missing_answers(document) == []
    assert undescribed_errors(document) == []


@pytest.mark.parametrize("service_id", SERVICES)
def test_every_service_documents_every_route(service_id, make_config):
    app = create_app(service_id, make_config())
    document = build_document(app, service_id, "1")
    check(document)
    assert "/api/v1/health" in document["paths"]


def test_the_gateway_documents_its_requests_from_the_schemas_it_validates_with(make_config):
    document = build_document(create_app("gateway", make_config()), "gateway", "1")
    paths = document["paths"]
    register = paths["/api/v1/auth/register"]["post"]
    body = document["components"]["schemas"]["Register"]
    assert register["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Register"}
    assert body["properties"]["username"]["minLength"] == 3 and body["properties"]["username"]["maxLength"] == 32
    assert set(body["required"]) == {"username", "password", "email", "nickname", "verify_code"}
    assert {"400", "403", "409", "429"} <= set(register["responses"]) and register["security"] == []
    upload = paths["/api/v1/files/upload"]["post"]["requestBody"]["content"]
    assert upload["multipart/form-data"]["schema"] == {"$ref": "#/components/schemas/UploadForm"}
    export = paths["/api/v1/sessions/{session_id}/export"]["get"]["responses"]["200"]["content"]
    assert set(export) == {"application/json", "text/markdown", "text/plain"}
    assert "image/jpeg" in paths["/api/v1/files/{file_id}/thumbnail"]["get"]["responses"]["200"]["content"]
    assert paths["/api/v1/admin/sessions"]["get"]["responses"]["403"]
    chat = paths["/ws/chat"]["get"]
    assert "101" in chat["responses"] and {"401", "403"} <= set(chat["responses"])
    assert {p["name"] for p in chat["parameters"] if p["in"] == "query"} >= {"token", "session_id", "after"}
    discord = paths["/api/v1/webhook/discord"]["post"]
    assert {p["name"] for p in discord["parameters"]} == {"X-Signature-Ed25519", "X-Signature-Timestamp"}


def test_the_ai_core_documents_its_streams(make_config):
    document = build_document(create_app("ai-core", make_config()), "ai-core", "1")
    stream = document["paths"]["/api/v1/chat/stream"]["post"]["responses"]["200"]["content"]
    assert list(stream) == ["text/event-stream"]
    door = document["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert set(door) == {"application/json", "text/event-stream"}


async def test_the_console_serves_the_document_of_its_api(aiohttp_client, make_config):
    app = create_console_app(make_config(), specs=[ServiceSpec(id="alpha", name="Alpha", port=free_port())])
    client = await aiohttp_client(app)
    document = await (await client.get("/api/v1/openapi.json")).json()
    check(document)
    assert "/api/services/{id}/start" in document["paths"] and "/ws" in document["paths"]
    page = await client.get("/api/v1/docs")
    assert page.status == 200 and "/api/services/{id}/restart" in await page.text()
    api = Conformance(client, document)
    await api.call("GET", "/api/health")
    await api.call("GET", "/api/services")
    await api.call("GET", "/api/services/alpha", "/api/services/{id}")
    await api.call("GET", "/api/logs/alpha", "/api/logs/{id}")
    status, _ = await api.call("POST", "/api/services/nope/stop", "/api/services/{id}/stop")
    assert status == 404


# ---------------------------------------------------------------- the answers fit the documents

def answer_schema(document: dict, method: str, path: str, status: int, media_type: str) -> dict:
    """The documented schema of an answer, with the components its `$ref`s point into."""
    responses = document["paths"][path][method.lower()]["responses"]
    assert str(status) in responses, f"{method} {path} answered {status}, which it does not document"
    content = responses[str(status)]["content"]
    assert media_type in content, f"{method} {path} {status} answered {media_type}, documented: {list(content)}"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **content[media_type]["schema"],
            "components": document["components"]}


class Conformance:
    """Calls a real app and checks each JSON answer against that app's own document."""

    def __init__(self, client, document: dict):
        self.client, self.document = client, document
        self.checked: list[str] = []

    async def call(self, method: str, path: str, template: str | None = None, **options):
        response = await self.client.request(method, path, **options)
        body = await response.json()
        schema = answer_schema(self.document, method, template or path, response.status, response.content_type)
        jsonschema.validate(body, schema)
        self.checked.append(f"{method} {template or path} {response.status}")
        return response.status, body


async def test_the_gateways_answers_fit_its_document(aiohttp_client, make_config, database_url):
    closed = f"http://127.0.0.1:{free_port()}"
    config = make_config({"database.url": database_url, "peers.ai_core_url": closed,
                          "peers.memory_service_url": closed, "peers.voice_service_url": closed,
                          "auth.registration_enabled": True, "plugins": {"auth": {"bcrypt_rounds": 4}}})
    app = create_app("gateway", config, spec=get_service("gateway"))
    client = await aiohttp_client(app)
    api = Conformance(client, await (await client.get("/api/v1/openapi.json")).json())

    await api.call("GET", "/api/v1/health")
    page = await client.get("/api/v1/docs")
    assert page.status == 200 and page.content_type == "text/html" and "/ws/chat" in await page.text()
    status, admin = await api.call("POST", "/api/v1/auth/login",
                                   json={"username": "admin", "password": config.get("auth.admin_password")})
    assert status == 200
    status, person = await api.call("POST", "/api/v1/auth/register", json={
        "username": "ada", "password": "secret-1", "email": "ada@example.org", "nickname": "Ada",
        "verify_code": config.get("auth.registration_verify_code")})
    assert status == 201
    as_admin = {"Authorization": f"Bearer {admin['token']}"}
    as_person = {"Authorization": f"Bearer {person['token']}"}
    await api.call("GET", "/api/v1/profile", headers=as_admin)
    await api.call("GET", "/api/v1/profile", headers=as_person)
    await api.call("POST", "/api/v1/auth/refresh", json={"refresh_token": person["refresh_token"]})

    status, session = await api.call("POST", "/api/v1/sessions", headers=as_person, json={"title": "Plans"})
    assert status == 201
    await get_context(app).contracts.require(CONVERSATIONS).add_message(
        session["id"], "user_ada", "user", "where shall we walk?", client_msg_id="m1")
    one = "/api/v1/sessions/{session_id}"
    await api.call("GET", "/api/v1/sessions", headers=as_person)
    await api.call("GET", f"/api/v1/sessions/{session['id']}", one, headers=as_person)
    status, page = await api.call("GET", f"/api/v1/sessions/{session['id']}/messages", one + "/messages",
                                  headers=as_person)
    assert len(page["messages"]) == 1
    await api.call("GET", f"/api/v1/sessions/{session['id']}/export", one + "/export", headers=as_person)
    status, found = await api.call("GET", "/api/v1/messages/search", params={"q": "walk"}, headers=as_person)
    assert found["total"] == 1
    status, _ = await api.call("GET", "/api/v1/sessions/no-such-session", one, headers=as_person)
    assert status == 404

    form = aiohttp.FormData()
    form.add_field("file", png(), filename="dot.png", content_type="image/png")
    status, uploaded = await api.call("POST", "/api/v1/files/upload", headers=as_person, data=form)
    assert status == 201
    await api.call("GET", "/api/v1/files", headers=as_person)
    await api.call("GET", f"/api/v1/files/{uploaded['id']}", "/api/v1/files/{file_id}", headers=as_person)
    await api.call("GET", f"/api/v1/images/analyze/{uploaded['id']}", "/api/v1/images/analyze/{file_id}",
                   headers=as_person)

    async with client.ws_connect(f"/ws/chat?token={admin['token']}&session_id=live-1&client_id=phone-1"):
        status, live = await api.call("GET", "/api/v1/admin/sessions", headers=as_admin)
        assert live["total"] == 1
        await api.call("GET", "/api/v1/admin/sessions/active", headers=as_admin)
        await api.call("GET", "/api/v1/admin/sessions/live-1", "/api/v1/admin/sessions/{id}", headers=as_admin)
        status, known = await api.call("GET", "/api/v1/admin/clients", headers=as_admin)
        assert known["clients"][0]["client_id"] == "phone-1"
    status, _ = await api.call("GET", "/api/v1/admin/sessions", headers=as_person)
    assert status == 403


async def test_the_ai_cores_answers_fit_its_document(aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url})
    app = create_app("ai-core", config, spec=get_service("ai-core"))
    client = await aiohttp_client(app)
    api = Conformance(client, await (await client.get("/api/v1/openapi.json")).json())
    as_peer = {"Authorization": f"Bearer {config.get('auth.service_token')}"}
    await api.call("GET", "/api/v1/health")
    await api.call("POST", "/api/v1/models/providers/local", "/api/v1/models/providers/{name}", headers=as_peer,
                   json={"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-local-key-1234"})
    await api.call("POST", "/api/v1/models/models/small", "/api/v1/models/models/{id}", headers=as_peer,
                   json={"name": "small-1", "provider": "local", "tags": ["chat"]})
    await api.call("POST", "/api/v1/models/routing/chat", "/api/v1/models/routing/{purpose}", headers=as_peer,
                   json={"fallback_chain": ["small"]})
    for path in ("/api/v1/models/providers", "/api/v1/models/models", "/api/v1/models/routing", "/api/v1/tools",
                 "/api/v1/tools/calls", "/api/v1/tools/calls/stats", "/v1/models"):
        await api.call("GET", path, headers=as_peer)
    status, _ = await api.call("DELETE", "/api/v1/models/models/none", "/api/v1/models/models/{id}", headers=as_peer)
    assert status == 404
    # The OpenAI door (the model cannot be reached: the offline agent answers) and its embeddings.
    status, answer = await api.call("POST", "/v1/chat/completions", headers=as_peer, json={
        "messages": [{"role": "user", "content": "现在几点"}], "seed": 1, "stop": "\n"})
    assert status == 200 and answer["model"] == "offline-agent"
    # The client's functions: the model that takes them cannot be reached, and the offline agent cannot call them.
    status, answer = await api.call("POST", "/v1/chat/completions", headers=as_peer, json={
        "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert status == 502 and answer["errorType"] == "all_models_failed"
    status, answer = await api.call("POST", "/v1/embeddings", headers=as_peer, json={"input": ["one", "two"]})
    assert status == 200 and len(answer["data"]) == 2


def png() -> bytes:
    image = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(image, "PNG")
    return image.getvalue()
