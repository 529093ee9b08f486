"""The issue's "Done means", end to end through the gateway's chat channel: a person tells the
assistant on their phone "I'm vegetarian and my sister is called Lena"; in a new session on their
laptop, "suggest a dinner for my sister's visit" reaches the model with both facts; "forget my
sister's name" removes that one. Four real services on loopback ports — the gateway (accounts,
sessions, the chat channel, the memory endpoints), the AI core (with memory recall and tools),
the memory service — and the scripted OpenAI-compatible model, which stores the facts with the
`remember` tool (the extraction of facts from a conversation is tested apart)."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.memory import client_plugin, proxy_plugin
from plugins.memory.assistant import assistant_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.memory.conftest import SERVICE, url_of
from tests.memory.test_recall import ScriptedModel, memory_block, model  # noqa: F401  (fixture)
from tests.support.fake_openai import route_to_model
from tests.support.servers import free_port


@pytest.fixture
async def gateway(memory_service, model, database_url, aiohttp_server, make_config):
    gateway_port = free_port()
    settings = {"database.url": database_url, "peers.gateway_url": f"http://127.0.0.1:{gateway_port}",
                "peers.memory_service_url": url_of(memory_service),
                "auth.registration_enabled": True, "auth.chat_for_all_users": True,
                "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20}}
    ai_core = await aiohttp_server(create_app("ai-core", make_config(settings), plugins=[
        tokens_plugin, ai_core_plugin, client_plugin, assistant_plugin]))
    ai_core_url = str(ai_core.make_url("")).rstrip("/")
    await route_to_model(ai_core_url, model.url, SERVICE)
    app = create_app("gateway", make_config({**settings, "peers.ai_core_url": ai_core_url}), plugins=[
        tokens_plugin, auth_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin,
        proxy_plugin])
    await aiohttp_server(app, port=gateway_port)
    async with aiohttp.ClientSession(f"http://127.0.0.1:{gateway_port}") as session:
        yield session


async def sign_up(gateway: aiohttp.ClientSession, username: str) -> dict:
    async with gateway.post("/api/v1/auth/register", json={
            "username": username, "password": "secret-pass", "email": f"{username}@example.org",
            "nickname": username, "verify_code": "ABC123"}) as response:
        assert response.status == 201, await response.text()
        return {"Authorization": f"Bearer {(await response.json())['token']}"}


async def say(gateway: aiohttp.ClientSession, person: dict, text: str, session_id: str, device: str) -> str:
    """One turn over /ws/chat from one device; the reply's text."""
    token = person["Authorization"].split(" ", 1)[1]
    async with gateway.ws_connect(f"/ws/chat?token={token}&session_id={session_id}&device_id={device}") as ws:
        await ws.send_json({"type": "message", "content": text})
        while True:
            frame = await asyncio.wait_for(ws.receive_json(), 60)
            if frame["type"] == "error":
                raise AssertionError(frame)
            if frame["type"] == "stream_end":
                return frame["text"]


async def test_told_on_the_phone_recalled_on_the_laptop_next_session_then_forgotten(gateway, model):
    anna = await sign_up(gateway, "anna")
    told = "I'm vegetarian and my sister is called Lena"
    model.tool_calls[told] = [
        # A diet is important (the rules store it with priority 7): recalled whatever the turn's words.
        ("remember", {"content": "The user is vegetarian", "category": "preference", "priority": 7}),
        ("remember", {"content": "The user's sister is called Lena", "category": "relationship"})]
    await say(gateway, anna, told, session_id="phone-monday", device="phone")

    await say(gateway, anna, "suggest a dinner for my sister's visit", session_id="laptop-tuesday",
              device="laptop")
    request = model.requests[-1]
    assert [m["role"] for m in request["messages"]] == ["system", "user"]  # a new session: no history
    lines = memory_block(request["messages"][0]["content"])
    assert "[preference] You are vegetarian." in lines   # stored neutral, said to the person
    assert "[relationship] Your sister is called Lena." in lines

    model.tool_calls["forget my sister's name"] = ("forget", {"description": "my sister's name"})
    answer = await say(gateway, anna, "forget my sister's name", session_id="laptop-tuesday", device="laptop")
    assert '"status": "awaiting_confirmation"' in answer and "sister is called Lena" in answer  # asked first
    answer = await say(gateway, anna, "yes", session_id="laptop-tuesday", device="laptop")
    assert answer == "Done, I've forgotten: Your sister is called Lena."
    async with gateway.get("/api/v1/memory", headers=anna) as response:
        assert response.status == 200, await response.text()
        memories = (await response.json())["memories"]
    assert [(m["content"], m["source"], m["source_session_id"]) for m in memories] == [
        ("The user is vegetarian.", "explicit", "phone-monday")]
