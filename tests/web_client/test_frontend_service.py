"""The frontend service without a browser: its headers, its proxy to the gateway (bodies both
ways, the refresh token kept in an HttpOnly cookie, cross-site requests refused) and the chat
WebSocket carried through it."""
from __future__ import annotations

import json

import aiohttp
import pytest
from yarl import URL

from tests.web_client.conftest import TEST_ADMIN_PASSWORD

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_the_page_and_its_modules_are_served_under_a_strict_policy(services):
    async with aiohttp.ClientSession() as http:
        async with http.get(services.frontend_url + "/") as page:
            assert page.status == 200 and page.content_type == "text/html"
            policy = page.headers["Content-Security-Policy"]
            assert "default-src 'none'" in policy and "script-src 'self'" in policy
            assert "connect-src 'self'" in policy and "unsafe" not in policy
            assert page.headers["X-Content-Type-Options"] == "nosniff"
            assert '<script type="module" src="/static/js/main.js">' in await page.text()
        async with http.get(services.frontend_url + "/static/js/main.js") as module:
            assert module.status == 200 and module.content_type == "text/javascript"
        async with http.get(services.frontend_url + "/static/vendor/marked.LICENSE") as licence:
            assert licence.status == 200
        async with http.get(services.frontend_url + "/static/../__init__.py") as escape:
            assert escape.status == 404


async def test_the_manifest_and_its_icons_make_the_app_installable(services):
    import io

    from PIL import Image

    async with aiohttp.ClientSession() as http:
        async with http.get(services.frontend_url + "/") as page:
            assert '<link rel="manifest" href="/static/manifest.webmanifest">' in await page.text()
        async with http.get(services.frontend_url + "/static/manifest.webmanifest") as answer:
            assert answer.status == 200 and answer.content_type == "application/manifest+json"
            manifest = await answer.json(content_type=None)
        assert manifest["name"] and manifest["short_name"] and manifest["display"] == "standalone"
        assert manifest["start_url"] == "/" and manifest["scope"] == "/" and manifest["theme_color"].startswith("#")
        sizes = set()
        for icon in manifest["icons"]:
            async with http.get(services.frontend_url + icon["src"]) as image:
                assert image.status == 200 and image.content_type == icon["type"]
                if icon["type"] == "image/png":
                    picture = Image.open(io.BytesIO(await image.read()))
                    assert f"{picture.width}x{picture.height}" == icon["sizes"]
                    sizes.add(icon["sizes"])
        assert {"192x192", "512x512"} <= sizes


async def test_the_service_worker_is_served_at_the_root_with_the_shell_and_its_version(services):
    async with aiohttp.ClientSession() as http:
        async with http.get(services.frontend_url + "/sw.js") as answer:
            assert answer.status == 200 and answer.content_type == "text/javascript"
            assert answer.headers["Cache-Control"] == "no-cache"
            assert "worker-src 'self'" in answer.headers["Content-Security-Policy"]
            source = await answer.text()
        version_line, shell_line = source.splitlines()[:2]
        assert version_line.startswith('const VERSION = "') and len(version_line) == len('const VERSION = "";') + 16
        shell = json.loads(shell_line.removeprefix("const SHELL = ").removesuffix(";"))
        assert {"/", "/static/app.css", "/static/js/main.js", "/static/js/panes/inbox.js",
                "/static/vendor/marked.esm.js", "/static/icons/icon-192.png", "/static/manifest.webmanifest"} <= set(shell)
        assert not [url for url in shell if url.startswith(("/api/", "/ws/")) or url.endswith((".LICENSE", "/sw.js"))]
        for url in shell:
            async with http.get(services.frontend_url + url) as file:
                assert file.status == 200, url
        async with http.get(services.frontend_url + "/static/sw.js") as raw:
            assert raw.status == 404     # only at /sw.js, where its scope is the whole site


async def test_the_shell_version_changes_with_any_static_file(tmp_path):
    from plugins.frontend import ServiceWorkerSource, shell_version

    (tmp_path / "js").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html>")
    (tmp_path / "js" / "main.js").write_text("one")
    (tmp_path / "sw.js").write_text("// worker")
    source = ServiceWorkerSource(tmp_path)
    first = source.build()
    assert first.endswith(b"// worker") and b'"/static/js/main.js"' in first and b'"/static/sw.js"' not in first
    assert source.build() == first
    (tmp_path / "js" / "main.js").write_text("two")
    second = source.build()
    assert second != first and shell_version(tmp_path)[0].encode() in second
    (tmp_path / "vendor.LICENSE").write_text("licence")     # not part of the shell
    assert source.build().splitlines()[0] == second.splitlines()[0]


async def test_sign_in_moves_the_refresh_token_into_an_http_only_cookie_and_refresh_rotates_it(services):
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.post(services.frontend_url + "/api/v1/auth/login",
                             json={"username": "admin", "password": TEST_ADMIN_PASSWORD}) as login:
            assert login.status == 200
            body = await login.json()
            assert "refresh_token" not in body and body["token"] and body["refresh_token_cookie"] is True
            cookie = login.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/api/v1/auth/" in cookie
        first = jar.filter_cookies(URL(services.frontend_url + "/api/v1/auth/refresh"))["assistant_refresh"].value
        async with http.post(services.frontend_url + "/api/v1/auth/refresh", json={}) as refreshed:
            assert refreshed.status == 200
            token = (await refreshed.json())["token"]
        second = jar.filter_cookies(URL(services.frontend_url + "/api/v1/auth/refresh"))["assistant_refresh"].value
        assert second != first
        async with http.get(services.frontend_url + "/api/v1/profile",
                            headers={"Authorization": f"Bearer {token}"}) as profile:
            assert (await profile.json())["user_id"] == "admin"
        async with http.post(services.frontend_url + "/api/v1/auth/logout", json={},
                             headers={"Authorization": f"Bearer {token}"}) as logout:
            assert logout.status == 200 and (await logout.json())["revoked"] >= 1
        async with http.post(services.frontend_url + "/api/v1/auth/refresh", json={}) as after:
            assert after.status == 401


async def test_two_refreshes_with_the_same_cookie_at_once_share_one_rotation(services):
    """Two tabs renewing at the same moment must not look like a stolen token to the gateway."""
    import asyncio

    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.post(services.frontend_url + "/api/v1/auth/login",
                             json={"username": "admin", "password": TEST_ADMIN_PASSWORD}):
            pass

        async def refresh():
            async with http.post(services.frontend_url + "/api/v1/auth/refresh", json={}) as answer:
                return answer.status, await answer.json()

        (status_a, body_a), (status_b, body_b) = await asyncio.gather(refresh(), refresh())
        assert status_a == status_b == 200 and body_a["token"] == body_b["token"]
        status, _ = await refresh()
        assert status == 200


async def test_cross_site_requests_and_upgrades_are_refused_by_the_proxy(services):
    async with aiohttp.ClientSession() as http:
        async with http.post(services.frontend_url + "/api/v1/auth/login", json={"username": "admin", "password": "x"},
                             headers={"Origin": "https://evil.example"}) as login:
            assert login.status == 403 and (await login.json())["errorType"] == "cross_site_request"
        async with http.post(services.frontend_url + "/api/v1/sessions", json={},
                             headers={"Sec-Fetch-Site": "cross-site"}) as create:
            assert create.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(services.frontend_url + "/ws/chat?token=x", headers={"Origin": "https://evil.example"})
        assert refused.value.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as unauthenticated:
            await http.ws_connect(services.frontend_url + "/ws/chat?token=not-a-token",
                                  headers={"Origin": services.frontend_url})
        assert unauthenticated.value.status == 401


async def test_chat_upload_and_rename_go_through_the_proxy(services):
    async with aiohttp.ClientSession() as http:
        async with http.post(services.frontend_url + "/api/v1/auth/login",
                             json={"username": "admin", "password": TEST_ADMIN_PASSWORD}) as login:
            token = (await login.json())["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        async with http.post(services.frontend_url + "/api/v1/sessions", json={"session_id": "proxied"},
                             headers={**bearer, "Origin": services.frontend_url}) as created:
            assert created.status == 201
        async with http.patch(services.frontend_url + "/api/v1/sessions/proxied", json={"title": "  Trip  "},
                              headers=bearer) as renamed:
            assert renamed.status == 200 and (await renamed.json())["title"] == "Trip"
        async with http.patch(services.frontend_url + "/api/v1/sessions/proxied", json={"title": "   "},
                              headers=bearer) as blank:
            assert blank.status == 400
        form = aiohttp.FormData()
        form.add_field("file", b"hello notes", filename="notes.txt", content_type="text/plain")
        async with http.post(services.frontend_url + "/api/v1/files/upload", data=form, headers=bearer) as upload:
            assert upload.status == 201
            stored = await upload.json()
        async with http.get(services.frontend_url + stored["url"], headers=bearer) as download:
            assert await download.read() == b"hello notes"
        ws = await http.ws_connect(f"{services.frontend_url}/ws/chat?token={token}&session_id=proxied",
                                   headers={"Origin": services.frontend_url})
        await ws.send_json({"type": "message", "content": "Hi", "client_msg_id": "p-1"})
        kinds = []
        while not kinds or kinds[-1] != "stream_end":
            kinds.append((await ws.receive_json(timeout=10))["type"])
        assert kinds[0] == "stream_start" and "stream_chunk" in kinds
        await ws.close()


async def test_a_service_listens_on_loopback_unless_configured_otherwise(make_config):
    from gateway.serving import listen_host

    assert listen_host(make_config(), "frontend") == "127.0.0.1"
    opened = make_config({"core.listen_hosts": {"frontend": "0.0.0.0"}})
    assert listen_host(opened, "frontend") == "0.0.0.0"
    assert listen_host(opened, "gateway") == "127.0.0.1"
    assert listen_host(opened, "frontend", "192.168.1.5") == "192.168.1.5"
