"""The console's pages over HTTP (no browser): every panel renders with the navigation and a
strict Content Security Policy, and the static route serves only its own files. The browser
tests (tests/console/browser) check what the pages do."""
from __future__ import annotations

import base64
import re

from console.app import create_console_app
from console.pages import CONTENT_SECURITY_POLICY, PANELS, STATIC


async def test_every_panel_renders_with_the_navigation_and_a_strict_policy(aiohttp_client, service_table,
                                                                            make_config):
    client = await aiohttp_client(create_console_app(make_config(), specs=service_table([{"id": "alpha"}])))
    for panel in PANELS:
        response = await client.get(panel.path)
        assert response.status == 200, panel.slug
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
        page = await response.text()
        assert f'<script type="module" src="/static/panel-{panel.slug}.js"></script>' in page
        assert len(re.findall(r'<a href="/[a-z-]*"', page)) == len(PANELS) == 15
        assert "<script>" not in page and " style=" not in page and " on" + "click=" not in page
        assert (STATIC / f"panel-{panel.slug}.js").is_file()


async def test_the_static_route_serves_only_the_pages_files(aiohttp_client, service_table, make_config):
    client = await aiohttp_client(create_console_app(make_config(), specs=service_table([{"id": "alpha"}])))
    script = await client.get("/static/console.js")
    assert script.status == 200 and script.content_type == "text/javascript"
    assert script.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/static/console.css")).content_type == "text/css"
    for name in ["missing.js", "..%2Fapp.py", "app.py", "Console.js", ".hidden.js"]:
        response = await client.get(f"/static/{name}")
        assert response.status == 404, name
        assert (await response.json())["errorType"] == "not_found"


async def test_pages_of_a_console_that_asks_for_a_credential_take_the_browsers_basic_login(
        aiohttp_client, service_table, make_config, monkeypatch):
    monkeypatch.delenv("CONSOLE_TOKEN", raising=False)
    config = make_config({"console.token": "operator-token"})
    client = await aiohttp_client(create_console_app(config, host="0.0.0.0", specs=service_table([{"id": "alpha"}])))
    refused = await client.get("/")
    assert refused.status == 401 and refused.headers["WWW-Authenticate"].startswith("Basic")
    login = {"Authorization": "Basic " + base64.b64encode(b"admin:operator-token").decode()}
    assert (await client.get("/", headers=login)).status == 200
    assert (await client.get("/static/console.js", headers=login)).status == 200
    socket = await client.ws_connect("/ws", headers=login)
    await socket.close()
