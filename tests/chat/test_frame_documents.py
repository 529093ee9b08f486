"""The AsyncAPI document of `/ws/chat` cannot drift from what is sent: real turns through a real
gateway and the real AI core, on the scripted provider and the fake OpenAI provider's
behaviours, make every documented server frame type, and each frame two devices receive must
fit the payload documented for its `type` (an undocumented type fails)."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.app import create_app
from gateway.context import CONTEXT
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.chat.contract import CHAT_TURNS
from plugins.files import files_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.chat.conftest import ADMIN, SERVICE_TOKEN, token_for
from tests.support.asyncapi import FrameChecker, validate_document
from tests.support.fake_openai import serve_fake_provider

SESSION = "frame-documents"


async def route_chat(ai_core_url: str, chain: list[str], required: bool = True) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}) as http:
        async with http.post(f"{ai_core_url}/api/v1/models/routing/chat",
                             json={"fallback_chain": chain, "required": required}) as response:
            assert response.status == 200, await response.text()


async def add_models(ai_core_url: str, base_url: str, behaviours: list[str]) -> None:
    """A provider and a model per behaviour of the fake OpenAI provider (model id = behaviour)."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}) as http:
        for behaviour in behaviours:
            for path, body in [(f"/api/v1/models/providers/p-{behaviour}",
                                {"base_url": f"{base_url}/{behaviour}/v1", "api_key": "key"}),
                               (f"/api/v1/models/models/{behaviour}",
                                {"name": behaviour, "provider": f"p-{behaviour}", "tags": ["chat"]})]:
                async with http.post(ai_core_url + path, json=body) as response:
                    assert response.status == 200, await response.text()


class Device:
    """One connection; every frame it receives is checked against the document as it arrives."""

    def __init__(self, ws, checker: FrameChecker):
        self.ws, self.checker = ws, checker

    async def until(self, kind: str, timeout: float = 10.0) -> list[dict]:
        frames = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            frame = await asyncio.wait_for(self.ws.receive_json(),
                                           max(0.0, deadline - asyncio.get_running_loop().time()))
            self.checker.check(frame)
            frames.append(frame)
            if frame["type"] == kind:
                return frames

    async def turn(self, text: str, client_msg_id: str) -> list[dict]:
        await self.ws.send_json({"type": "message", "content": text, "client_msg_id": client_msg_id})
        return await self.until("stream_end")


@pytest.fixture
async def gateway(database_url, ai_core_url, aiohttp_client, make_config, chat_settings):
    config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                          "plugins.chat": chat_settings})
    return await aiohttp_client(create_app("gateway", config, plugins=[
        tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin, notifications_plugin]))


async def test_every_frame_of_real_turns_fits_the_documented_schema(gateway, ai_core_url, provider, aiohttp_server):
    response = await gateway.get("/api/v1/asyncapi.json")
    assert response.status == 200
    document = await response.json()
    validate_document(document)
    checker = FrameChecker(document)
    fake = await serve_fake_provider(aiohttp_server)
    await add_models(ai_core_url, fake.url, ["thinker", "tools", "broken"])
    token = token_for(gateway, ADMIN)
    sender_ws = await gateway.ws_connect(f"/ws/chat?token={token}&session_id={SESSION}&client_id=phone")
    other_ws = await gateway.ws_connect(f"/ws/chat?token={token}&session_id={SESSION}&client_id=laptop")
    sender, other = Device(sender_ws, checker), Device(other_ws, checker)
    try:
        await sender.ws.send_json({"type": "ping"})
        await sender.until("pong")
        await sender.ws.send_json({"type": "no_such_frame"})
        assert (await sender.until("error"))[-1]["msg_type"] == "system_info"

        # A reply on the scripted provider: the sender sees it; the other device the echo first,
        # naming the device it came from.
        frames = await sender.turn("Hello?", "m1")
        assert [f["type"] for f in frames][:2] == ["stream_start", "stream_chunk"] and frames[-2]["type"] == "review"
        assert all(f["response_mode"] == "text" for f in frames)
        echo = (await other.until("stream_end"))[0]
        assert echo["type"] == "response" and echo["client_info"]["client_id"] == "phone"

        # A second message while the first is held: it is queued, then answered.
        provider.gate.clear()
        await sender.ws.send_json({"type": "message", "content": "first", "client_msg_id": "m2"})
        await sender.until("stream_chunk")
        await sender.ws.send_json({"type": "message", "content": "second", "client_msg_id": "m3"})
        await sender.until("queued")
        provider.gate.set()
        await sender.until("stream_end")
        await sender.until("stream_end")

        # The person regenerates the last reply, then stops the next one mid-stream.
        await sender.ws.send_json({"type": "regenerate"})
        assert (await sender.until("stream_end"))[0]["type"] == "history_changed"
        provider.gate.clear()
        await sender.ws.send_json({"type": "regenerate"})
        await sender.until("stream_chunk")
        await sender.ws.send_json({"type": "stop"})
        assert (await sender.until("stream_end"))[-1]["finish_reason"] == "stopped"
        provider.gate.set()

        await route_chat(ai_core_url, ["thinker"])
        assert any(f["type"] == "thinking" for f in await sender.turn("Think first.", "m4"))
        await route_chat(ai_core_url, ["tools"])
        assert any(f["type"] == "tool_progress" for f in await sender.turn("What time is it?", "m5"))
        # Every model fails and the offline agent answers, with a notice.
        await route_chat(ai_core_url, ["broken"], required=False)
        assert any(f["type"] == "system_info" for f in await sender.turn("Explain quantum foam.", "m6"))
        # Every model fails and the route requires one: the turn fails.
        await route_chat(ai_core_url, ["broken"], required=True)
        failed = await sender.turn("Explain it again.", "m7")
        assert any(f["type"] == "error" and f.get("turn_id") for f in failed)

        await sender.ws.send_json({"type": "history", "limit": 5})
        assert (await sender.until("history_response"))[-1]["messages"]
        pushed = await gateway.post("/api/v1/notifications/push", headers={"Authorization": f"Bearer {token}"},
                                    json={"user_id": "admin", "type": "info", "title": "Hi", "body": "there"})
        assert pushed.status == 200, await pushed.text()
        await sender.until("notification")
        await other.until("notification")

        # Several messages said together (an automation run's): one multi_message on every device.
        chat = gateway.server.app[CONTEXT].contracts.require(CHAT_TURNS)
        await chat.post_messages("admin", SESSION, ["The heating is on.", "The door is locked."])
        await sender.until("multi_message")
        await other.until("multi_message")

        # A rename (by the person, or the assistant's title): every device hears it.
        renamed = await gateway.patch(f"/api/v1/sessions/{SESSION}", headers={"Authorization": f"Bearer {token}"},
                                      json={"title": "Frames"})
        assert renamed.status == 200, await renamed.text()
        await sender.until("session_updated")
        await other.until("session_updated")
    finally:
        await sender_ws.close()
        await other_ws.close()
    documented = {key.removeprefix("server.") for key in document["channels"]["ws.chat"]["messages"]
                  if key.startswith("server.")}
    assert set(checker.seen) == documented, f"documented but never seen: {documented - set(checker.seen)}"
