"""Attachments: a file_id becomes a short-lived signed download URL that the real AI core
fetches without the user's token; data URIs pass as given; relative paths are completed."""
from __future__ import annotations

import base64
import time

from aiohttp import FormData

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.chat.conftest import ADMIN, context_of, receive_until, token_for
from tests.support.fake_openai import PIXEL_PNG
from plugins.files.contract import FILES


async def upload(client) -> dict:
    form = FormData()
    form.add_field("file", PIXEL_PNG, filename="pixel.png", content_type="image/png")
    response = await client.post("/api/v1/files/upload", data=form,
                                 headers={"Authorization": f"Bearer {token_for(client, ADMIN)}"})
    assert response.status == 201, await response.text()
    return await response.json()


async def test_signed_download_urls_work_without_a_token_until_they_expire(gateway):
    record = await upload(gateway)
    files = context_of(gateway).contracts.require(FILES)
    url = files.signed_download_url(record["id"], ttl=60)
    response = await gateway.get(url)
    assert response.status == 200 and await response.read() == PIXEL_PNG
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    expired = files.signed_download_url(record["id"], ttl=-1)
    assert (await gateway.get(expired)).status == 401
    other_file = url.replace(record["id"], "00000000-0000-0000-0000-000000000000")
    assert (await gateway.get(other_file)).status == 401
    assert (await gateway.get(url.replace("signature=", "signature=0"))).status == 401
    # Without a signature the route still wants the bearer token.
    assert (await gateway.get(f"/api/v1/files/{record['id']}/download")).status == 401
    expires = int(time.time()) + 60
    assert (await gateway.get(f"/api/v1/files/{record['id']}/download?expires={expires}&signature=abc")).status == 401


async def test_a_file_id_attachment_reaches_the_model_as_an_image(make_gateway, provider, gateway_port):
    gateway = await make_gateway(port=gateway_port)
    record = await upload(gateway)
    data_uri = "data:image/png;base64," + base64.b64encode(PIXEL_PNG).decode()
    async with gateway.ws_connect(f"/ws/chat?token={token_for(gateway, ADMIN)}&session_id=pics") as ws:
        await ws.send_json({"type": "message", "content": "what is this?",
                            "attachments": [{"type": "image", "file_id": record["id"]}]})
        await receive_until(ws, "stream_end")
        await ws.send_json({"type": "message", "content": "and this?", "attachments": [{"url": data_uri}]})
        await receive_until(ws, "stream_end")
        await ws.send_json({"type": "message", "content": "x", "attachments": [{"file_id": "nope"}]})
        error = await ws.receive_json(timeout=5)
        assert error["type"] == "error" and error["errorType"] == "file_not_found"
        await ws.send_json({"type": "message", "content": "x", "attachments": [{"url": "/relative.png"}]})
        error = await ws.receive_json(timeout=5)
        assert error["errorType"] == "invalid_attachment"
    images = [part["image_url"]["url"] for request in provider.requests for message in request["messages"]
              if isinstance(message.get("content"), list) for part in message["content"]
              if part.get("type") == "image_url"]
    assert images[0] == data_uri  # the AI core fetched the signed URL and inlined the bytes
    assert images[-1] == data_uri


async def test_relative_paths_are_completed_with_the_public_base_url(make_gateway, provider):
    from plugins.chat.attachments import resolve_attachments

    gateway = await make_gateway(overrides={"core.public_base_url": "https://assistant.example/"})
    resolved = await resolve_attachments(context_of(gateway), "admin", [{"url": "/static/a.png", "width": 3}], 60)
    assert resolved == [{"type": "image", "url": "https://assistant.example/static/a.png", "width": 3}]


async def test_without_the_files_plugin_file_ids_are_refused_and_the_rest_works(
        aiohttp_client, make_config, database_url, ai_core_url, provider, chat_settings):
    config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                          "plugins.chat": chat_settings})
    gateway = await aiohttp_client(create_app("gateway", config, plugins=[
        tokens_plugin, sessions_plugin, ai_core_client_plugin, chat_plugin]))
    data_uri = "data:image/png;base64," + base64.b64encode(PIXEL_PNG).decode()
    async with gateway.ws_connect(f"/ws/chat?token={token_for(gateway, ADMIN)}&session_id=no-files") as ws:
        await ws.send_json({"type": "message", "content": "and this?", "attachments": [{"url": data_uri}]})
        assert (await receive_until(ws, "stream_end"))[-1]["type"] == "stream_end"
        await ws.send_json({"type": "message", "content": "x", "attachments": [{"file_id": "f1"}]})
        error = await ws.receive_json(timeout=5)
        assert error["type"] == "error" and error["errorType"] == "attachment_unavailable"
