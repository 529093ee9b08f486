"""The console's REST API and WebSocket push, built by the production factory."""
from __future__ import annotations

import asyncio
import base64

import aiohttp
import pytest

from console.app import create_console_app
from console.typedefs import LOGS, STT_LOG


async def next_message(socket, predicate, timeout: float = 20.0) -> dict:
    async def scan():
        while True:
            message = await socket.receive_json()
            if predicate(message):
                return message
    return await asyncio.wait_for(scan(), timeout)


@pytest.mark.slow
async def test_services_logs_health_and_push(aiohttp_client, service_table, make_config):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    app = create_console_app(make_config({"console.stop_timeout": 5}), specs=specs)
    client = await aiohttp_client(app)
    socket = await client.ws_connect("/ws")

    health = await (await client.get("/api/health")).json()
    assert health["status"] == "ok" and health["service"] == "console" and health["wsClients"] == 1
    assert isinstance(health["uptime"], float)

    listed = await (await client.get("/api/services")).json()
    rows = [(row["id"], row["status"], row["pid"]) for row in listed["services"]]
    assert rows == [("alpha", "stopped", None)]

    response = await client.post("/api/services/start-all")
    assert response.status == 200
    body = await response.json()
    assert body["services"][0]["status"] == "running" and body["services"][0]["pid"]
    pushed = await next_message(socket,
                                lambda m: m["type"] == "status" and m["status"]["status"] == "running")
    assert pushed["service"] == "alpha"
    pushed_log = await next_message(socket, lambda m: m["type"] == "log")
    assert pushed_log["service"] == "alpha" and isinstance(pushed_log["line"], str)

    one = await (await client.get("/api/services/alpha")).json()
    assert one["id"] == "alpha" and one["running"] is True and one["port"] == specs[0].port

    missing = await client.post("/api/services/nope/start")
    assert missing.status == 404
    assert (await missing.json())["errorType"] == "unknown_service"

    app[STT_LOG].add("turn on the light", 123.456, engine="test")
    stt = await next_message(socket, lambda m: m["type"] == "stt-log")
    assert stt["entry"]["text"] == "turn on the light" and stt["entry"]["processingMs"] == 123.5

    stopped = await (await client.post("/api/services/stop-all")).json()
    assert [row["status"] for row in stopped["services"]] == ["stopped"]
    # Log paging on a known log, once nothing else writes to it (the service is stopped).
    service_log = app[LOGS].get("alpha")
    await service_log.clear()
    await service_log.append("".join(f"line {n}\n" for n in range(1, 251)).encode())
    page = await (await client.get("/api/logs/alpha")).json()
    assert len(page["lines"]) == 200 and page["lines"][-1] == "line 250" and page["hasMore"] is True
    page = await (await client.get("/api/logs/alpha", params={"lines": 3, "offset": 2})).json()
    assert page["lines"] == ["line 246", "line 247", "line 248"]
    page = await (await client.get("/api/logs/alpha", params={"lines": 100, "offset": 200})).json()
    assert page["lines"][0] == "line 1" and len(page["lines"]) == 50 and page["hasMore"] is False
    recent = await (await client.get("/api/logs/alpha/recent")).json()
    assert len(recent["lines"]) == 100 and recent["lines"][0] == "line 151"
    bad = await client.get("/api/logs/alpha", params={"lines": "0"})
    assert bad.status == 400 and (await bad.json())["errorType"] == "validation_error"
    assert (await client.delete("/api/logs/alpha")).status == 200
    assert (await (await client.get("/api/logs/alpha")).json())["lines"] == []

    await socket.close()


async def test_a_failed_start_is_a_spec_error_body(aiohttp_client, service_table, make_config):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    holder = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", specs[0].port)
    try:
        client = await aiohttp_client(create_console_app(make_config(), specs=specs))
        response = await client.post("/api/services/alpha/start")
        assert response.status == 409
        body = await response.json()
        assert body["errorType"] == "port_in_use" and body["service"] == "alpha"
        assert body["hint"] == "Read its log: GET /api/logs/alpha"
        assert body["services"][0]["status"] == "failed"
    finally:
        holder.close()
        await holder.wait_closed()


async def test_a_console_on_another_address_requires_a_credential(aiohttp_client, service_table, make_config,
                                                                  monkeypatch):
    monkeypatch.delenv("CONSOLE_TOKEN", raising=False)
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    config = make_config({"console.token": "operator-token"})
    client = await aiohttp_client(create_console_app(config, host="0.0.0.0", specs=specs))

    assert (await client.get("/api/health")).status == 200  # health stays open for probes
    refused = await client.get("/api/services")
    assert refused.status == 401
    assert (await refused.json())["errorType"] == "unauthorized"
    assert (await client.get("/api/services", headers={"Authorization": "Bearer wrong"})).status == 401
    allowed = await client.get("/api/services", headers={"Authorization": "Bearer operator-token"})
    assert allowed.status == 200
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused_socket:
        await client.ws_connect("/ws")
    assert refused_socket.value.status == 401
    socket = await client.ws_connect("/ws", params={"token": "operator-token"})
    await socket.close()

    # Without a token, the administrator's password (HTTP Basic) is the credential.
    admin = make_config()
    client = await aiohttp_client(create_console_app(admin, host="192.0.2.10", specs=specs))
    good = base64.b64encode(f"admin:{admin.get('auth.admin_password')}".encode()).decode()
    assert (await client.get("/api/services", headers={"Authorization": f"Basic {good}"})).status == 200
    wrong = base64.b64encode(b"someone:" + admin.get("auth.admin_password").encode()).decode()
    assert (await client.get("/api/services", headers={"Authorization": f"Basic {wrong}"})).status == 401


async def test_loopback_console_without_a_token_asks_no_credential(aiohttp_client, service_table, make_config,
                                                                   monkeypatch):
    monkeypatch.delenv("CONSOLE_TOKEN", raising=False)
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    client = await aiohttp_client(create_console_app(make_config(), host="127.0.0.1", specs=specs))
    assert (await client.get("/api/services")).status == 200


async def test_a_configured_token_is_required_on_loopback_too(aiohttp_client, service_table, make_config,
                                                               monkeypatch):
    """Another user's process on the machine cannot restart services of a console that has a
    CONSOLE_TOKEN, though it reaches the loopback address; the console's pages get the browser's
    Basic login, the command line sends the token itself."""
    monkeypatch.delenv("CONSOLE_TOKEN", raising=False)
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    client = await aiohttp_client(create_console_app(make_config({"console.token": "operator-token"}),
                                                     host="127.0.0.1", specs=specs))
    assert (await client.get("/api/health")).status == 200
    for method, path in (("POST", "/api/services/alpha/restart"), ("POST", "/api/services/start-all"),
                         ("GET", "/api/services"), ("GET", "/")):
        refused = await client.request(method, path)
        assert refused.status == 401, path
        assert (await refused.json())["errorType"] == "unauthorized"
        assert refused.headers["WWW-Authenticate"] == 'Basic realm="console"'
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await client.ws_connect("/ws")
    assert (await client.get("/api/services", headers={"Authorization": "Bearer operator-token"})).status == 200
    basic = base64.b64encode(b"admin:operator-token").decode()
    assert (await client.get("/", headers={"Authorization": f"Basic {basic}"})).status == 200


async def test_other_web_origins_and_rebound_host_names_cannot_drive_the_console(aiohttp_client, service_table,
                                                                                 make_config):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    client = await aiohttp_client(create_console_app(make_config(), host="127.0.0.1", specs=specs))
    own = f"http://{client.server.host}:{client.server.port}"

    async def refused(response) -> bool:
        if response.status != 403:
            return False
        assert (await response.json())["errorType"] == "cross_site_request"
        return True

    # A page on another site posting a simple (no-preflight) request: by Origin, or by what the
    # browser says in Sec-Fetch-Site (a sibling subdomain counts: same-site is not same-origin).
    # An unknown service answers 404 once the request gets through.
    unsafe = [("POST", "/api/services/nope/start"), ("DELETE", "/api/logs/nope"),
              ("PUT", "/api/services/nope/start"), ("PATCH", "/api/services/nope/start")]
    for method, path in unsafe:
        assert await refused(await client.request(method, path, headers={"Origin": "https://evil.example"}))
        assert await refused(await client.request(method, path, headers={"Origin": "null"}))
        for site in ("cross-site", "same-site"):
            assert await refused(await client.request(method, path, headers={"Sec-Fetch-Site": site}))
        # The console's own pages (same origin), and the command line (neither header), pass.
        for headers in ({"Origin": own, "Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}, {}):
            assert (await client.request(method, path, headers=headers)).status in (404, 405), (method, headers)
    # Reading is not driving: a cross-site GET (which CORS keeps the page from reading) passes.
    assert (await client.get("/api/services", headers={"Sec-Fetch-Site": "cross-site"})).status == 200
    assert (await client.get("/api/services", headers={"Origin": "https://evil.example"})).status == 200

    # The push socket, which CORS does not cover.
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused_socket:
            await client.ws_connect("/ws", headers=headers)
        assert refused_socket.value.status == 403
    socket = await client.ws_connect("/ws", headers={"Origin": own, "Sec-Fetch-Site": "same-origin"})
    await socket.close()

    # DNS rebinding: the page's own name now points at 127.0.0.1, so Origin and Host agree.
    rebound = await client.get("/api/logs/alpha", headers={"Host": "evil.example:9090",
                                                           "Origin": "http://evil.example:9090"})
    assert rebound.status == 403 and (await rebound.json())["errorType"] == "bad_host"
    assert (await client.get("/api/services", headers={"Origin": own})).status == 200
    assert (await client.get("/api/services")).status == 200
    assert (await client.get("/api/services", headers={"Host": f"localhost:{client.server.port}"})).status == 200
