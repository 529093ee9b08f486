"""Every route of the real gateway and AI core services, as the service table assembles them,
fed hostile input by an authenticated administrator: the answer is never a 500 and every error
carries the spec's body. A route added later is covered without touching this test."""
import asyncio
import json
import re

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.serving import AccessLogger, ServiceRunner
from gateway.context import get_context
from gateway.identity import Identity
from gateway.plugins import REGISTRY
from gateway.services import get_service
from tests.support.servers import free_port
from plugins.auth.contract import TOKENS

BODIES = [
    ("empty", b"", "application/json"),
    ("not json", b"{oops", "application/json"),
    ("array", b"[1, 2]", "application/json"),
    ("wrong types", b'{"name": 5, "title": [], "content": {}, "message": null, "id": true, "limit": "x"}',
     "application/json"),
    ("form", b"a=1&b=2", "application/x-www-form-urlencoded"),
    ("bad multipart", b"--x\r\nnot a part\r\n", "multipart/form-data; boundary=x"),
    ("deeply nested", b"[" * 50000 + b"]" * 50000, "application/json"),
    ("nested object", b'{"message": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}", "application/json"),
    ("huge integer", b'{"message": "hi", "limit": 1' + b"0" * 5000 + b"}", "application/json"),
    ("NUL in text", b'{"message": "a\\u0000b", "title": "\\u0000", "name": "x\\u0000"}', "application/json"),
]
HUGE = "1" + "0" * 24  # beyond PostgreSQL's bigint (OFFSET's type)
QUERIES = ["", "?limit=-1&offset=abc&page=0&q=%00&user_id=", "?limit=999999999999&format=pdf&url=file:///etc/passwd",
           f"?page={HUGE}", f"?offset={HUGE}", f"?q=x&offset={HUGE}",
           "?expires=99999999999&signature=%C3%A9t%C3%A9"]  # not ASCII, where a signature is compared


def fill(path: str, value: str = "no-such-thing-0000") -> str:
    return re.sub(r"\{[^}]+\}", value, path)


@pytest.mark.parametrize("service_id", ["gateway", "ai-core", "memory-service"])
async def test_no_route_answers_500_to_hostile_input(service_id, aiohttp_client, make_config, database_url):
    closed = f"http://127.0.0.1:{free_port()}"  # peers are down: their failures must be 502s
    config = make_config({"database.url": database_url, "peers.ai_core_url": closed,
                          "peers.memory_service_url": closed, "peers.voice_service_url": closed,
                          "plugins": {"auth": {"bcrypt_rounds": 4}}})
    app = create_app(service_id, config, spec=get_service(service_id))
    client = await aiohttp_client(app)
    login = await client.post("/api/v1/auth/login", json={"username": "admin", "password": config.get("auth.admin_password")})
    if login.status == 200:
        token = (await login.json())["token"]
    else:  # the ai-core service has no login route: mint one the way the gateway would
        tokens = get_context(app).contracts.require(TOKENS)
        token, _ = tokens.issue_access(Identity("admin", "admin", is_admin=True))
    headers = {"Authorization": f"Bearer {token}"}
    routes = sorted({(method, path) for (method, path) in app[REGISTRY].route_owners if method != "HEAD"})
    assert len(routes) > 5
    failures = []
    for method, path in routes:
        if "{" in path:  # a NUL in an identifier (PostgreSQL refuses it in text)
            response = await client.request(method, fill(path, "id%00x"), headers=headers)
            if response.status >= 500:
                failures.append(f"{method} {path} [NUL id] -> {response.status} {await response.text()}")
            await response.release()
        for query in QUERIES:
            for label, body, content_type in (BODIES if method in ("POST", "PUT", "PATCH") else BODIES[:1]):
                response = await client.request(method, fill(path) + query, data=body,
                                                headers={**headers, "Content-Type": content_type})
                if response.status >= 500 and response.status not in (502, 503):  # 502/503: a peer is down
                    failures.append(f"{method} {path}{query} [{label}] -> {response.status} {await response.text()}")
                elif response.status >= 400 and response.content_type == "application/json":
                    answer = await response.json()
                    if not isinstance(answer, dict) or "error" not in answer:
                        failures.append(f"{method} {path}{query} [{label}] -> {response.status} without error body")
                await response.release()
    assert failures == [], "\n".join(failures)


async def test_hostile_frames_on_the_chat_socket_get_error_frames_and_the_socket_stays(aiohttp_client, make_config,
                                                                                       database_url):
    closed = f"http://127.0.0.1:{free_port()}"
    config = make_config({"database.url": database_url, "peers.ai_core_url": closed,
                          "plugins": {"auth": {"bcrypt_rounds": 4}}})
    app = create_app("gateway", config, spec=get_service("gateway"))
    client = await aiohttp_client(app)
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(Identity("admin", "admin", is_admin=True))
    async with client.ws_connect(f"/ws/chat?token={token}&session_id=hostile") as ws:
        for frame in ("[" * 50000 + "]" * 50000,
                      '{"type": "message", "content": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}",
                      '{"type": "message", "content": "hi", "timestamp": 1' + "0" * 5000 + "}"):
            await ws.send_str(frame)
            answer = await ws.receive_json(timeout=5)
            assert answer["type"] == "error", answer
        await ws.send_json({"type": "ping"})
        assert (await ws.receive_json(timeout=5))["type"] == "pong"


async def raw_exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as bytes on a fresh connection; the status, headers and body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)  # the server closes after an error
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize("label, request_bytes, status, error_type", [
    ("100 KB request line", b"GET /api/v1/health?q=" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     431, "request_too_large"),
    ("100 KB header", b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 100_000 + b"\r\n\r\n",
     431, "request_too_large"),
    ("too many headers", b"GET /api/v1/health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(500))
     + b"\r\n", 431, "request_too_large"),
    ("garbage request line", b"\x16\x03\x01 not http at all\r\n\r\n", 400, "malformed_request"),
])
async def test_what_the_http_parser_refuses_gets_the_error_body(label, request_bytes, status, error_type,
                                                               make_config, database_url):
    """aiohttp answers these before any middleware runs; the service's own runner (the one
    `gateway serve` uses) answers them in the spec's body."""
    config = make_config({"database.url": database_url})
    runner = ServiceRunner(create_app("gateway", config, spec=get_service("gateway")), access_log_class=AccessLogger)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        answered, headers, body = await raw_exchange(site.port, request_bytes)
        assert answered == status, body
        assert headers["content-type"].startswith("application/json")
        answer = json.loads(body)
        assert answer["errorType"] == error_type and answer["error"] and answer["hint"]
        assert "aaaa" not in answer["error"] + answer["hint"]  # the request is not echoed back
        # The same runner still answers a normal request.
        answered, _, _ = await raw_exchange(site.port, b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n"
                                                       b"Connection: close\r\n\r\n")
        assert answered == 200
    finally:
        await runner.cleanup()


async def test_a_number_beyond_its_column_is_a_400(aiohttp_client, make_config, database_url):
    """Found by the fuzzer (tests/fuzz): the AI core stored a model's priority in an INTEGER
    column without bounding it, so 10**22 reached PostgreSQL and came back as a 500."""
    config = make_config({"database.url": database_url})
    app = create_app("ai-core", config, spec=get_service("ai-core"))
    client = await aiohttp_client(app)
    headers = {"Authorization": f"Bearer {config.get('auth.service_token')}"}
    for priority in (10**22, -(2**31) - 1, 2**31):
        response = await client.post("/api/v1/models/models/big", headers=headers,
                                     json={"name": "m", "provider": "p", "priority": priority})
        assert response.status == 400, await response.text()
        assert (await response.json())["errorType"] == "validation_error"
    response = await client.post("/api/v1/models/models/big", headers=headers,
                                 json={"name": "m", "provider": "p", "priority": 2**31 - 1})
    assert response.status == 200, await response.text()


async def test_a_page_or_offset_past_any_table_is_a_400(aiohttp_client, make_config, database_url):
    """Found by the fuzzer (tests/fuzz): pages and offsets were bounded below only, so one past
    PostgreSQL's bigint reached OFFSET and came back as a 500."""
    config = make_config({"database.url": database_url, "plugins": {"auth": {"bcrypt_rounds": 4}}})
    gateway = await aiohttp_client(create_app("gateway", config, spec=get_service("gateway")))
    ai_core = await aiohttp_client(create_app("ai-core", config, spec=get_service("ai-core")))
    token, _ = get_context(gateway.server.app).contracts.require(TOKENS).issue_access(
        Identity("admin", "admin", is_admin=True))
    headers = {"Authorization": f"Bearer {token}"}
    assert (await gateway.post("/api/v1/sessions", json={"session_id": "paged"}, headers=headers)).status == 201
    for client, path in [(gateway, f"/api/v1/sessions/paged/messages?offset={HUGE}"),
                         (gateway, f"/api/v1/messages/search?q=x&offset={HUGE}"),
                         (gateway, f"/api/v1/files?page={HUGE}"),
                         (gateway, "/api/v1/files?limit=100&page=92233720368547759"),  # (page - 1) * limit > bigint
                         (ai_core, f"/api/v1/tools/calls?page={HUGE}")]:
        response = await client.get(path, headers=headers)
        assert response.status == 400, f"{path}: {response.status} {await response.text()}"
        assert (await response.json())["errorType"] == "validation_error"
