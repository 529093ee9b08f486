"""The console's pages over HTTP (no browser): every panel renders with the navigation and a
strict Content Security Policy, and the static route serves only its own files. The browser
tests (tests/console/browser) check what the pages do."""
from __future__ import annotations

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
        assert len(re.findall(r'<a href="/[a-z-]*"', page)) == len(PANELS) == 14
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
