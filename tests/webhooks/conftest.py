"""The webhook tests run the real AI core service on a loopback port, pointed at a small local
server speaking the OpenAI-compatible streaming chat-completions protocol."""
from __future__ import annotations

import json

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.context import get_context
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.chat import plugin as chat_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.webhooks import plugin as webhooks_plugin
from tests.support.servers import free_port
from plugins.sessions.contract import CONVERSATIONS

WEBHOOK_KEY = "test-webhook-key"  # the make_config fixture's plugins.webhooks.webhook_key


def chunk(model: str, content: str | None, finish_reason: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    payload = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


@pytest.fixture
async def provider(aiohttp_server):
    """Streams `echo(<n> earlier): <last user text>`; keeps every request body."""
    seen: list[dict] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        turns = [m for m in body["messages"] if m["role"] in ("user", "assistant")]
        text = f"echo({len(turns) - 1} earlier): {turns[-1]['content']}"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for start in range(0, len(text), 5):
            await response.write(chunk(body["model"], text[start:start + 5]))
        await response.write(chunk(body["model"], None, "stop"))
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    server = await aiohttp_server(app)
    server.seen = seen
    return server


@pytest.fixture
async def ai_core_url(aiohttp_server, make_config, postgres_server, provider):
    name = postgres_server.create_database()
    config = make_config({"database.url": postgres_server.database_url(name),
                          "plugins.ai_core.openai_base_url": str(provider.make_url("/v1")),
                          "plugins.ai_core.openai_api_key": "provider-key", "plugins.ai_core.default_model": "echo-model"})
    server = await aiohttp_server(create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin]))
    yield str(server.make_url("")).rstrip("/")
    await server.close()
    postgres_server.drop_database(name)


@pytest.fixture
def make_gateway(aiohttp_client, make_config, database_url):
    """A gateway with the webhooks plugin (and chat, whose turns it uses); `(client, conversations)`."""
    async def build(ai_core_url: str, **overrides):
        config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url, **overrides})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin, chat_plugin, webhooks_plugin])
        client = await aiohttp_client(app)
        return client, get_context(app).contracts.require(CONVERSATIONS)
    return build


@pytest.fixture
def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"
