"""One set of real services for a module of browser tests: the frontend service (its pages and
its proxy) in front of the gateway (auth, sessions, files, notifications, chat), the real AI
core (with the session_titles plugin), and a small OpenAI-compatible server whose replies depend
on what the person wrote."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest
import pytest_asyncio
from aiohttp import web

from gateway.app import create_app
from gateway.config import Config
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.frontend import plugin as frontend_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.reminders import plugin as reminders_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.titles import plugin as titles_plugin
from plugins.voice.gateway import plugin as voice_plugin
from tests.conftest import TEST_ADMIN_PASSWORD
from tests.support.fake_openai import TITLE_PROMPT, route_to_model
from tests.support.fake_voice import FakeVoiceService
from tests.support.servers import free_port

SERVICE_TOKEN = "test-service-token"
MARKDOWN_REPLY = ("# Plan\n\nSome **bold** words and a list:\n\n- one\n- two\n\n"
                  "```python\ndef answer():\n    return 42  # the answer\n```\n\n"
                  "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">\n\n"
                  "<action>waves goodbye</action>")
SLOW_WORDS = [f"word{number}" for number in range(1, 21)]
# The model's title for a conversation that begins with TRIP_REQUEST (session_titles); the title
# request of any other conversation is answered with nothing, which leaves its title as it is.
TRIP_REQUEST = "Help me plan a trip to Lisbon"
TRIP_TITLE = "Lisbon trip plan"
TRIP_TITLE_GATE = asyncio.Event()  # the trip's title is answered once this is set (a test holds it)
TRIP_TITLE_GATE.set()


def sse(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-web", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def reply_for(messages: list[dict]) -> tuple[list[str], float]:
    """The reply's pieces and the pause between them, by what the last user message says."""
    last = messages[-1]["content"]
    if str(messages[0].get("content", "")).startswith(TITLE_PROMPT):
        return ([f'Title: "{TRIP_TITLE}."'] if TRIP_REQUEST in last else [""]), 0
    if isinstance(last, list):
        text = " ".join(part.get("text", "") for part in last if part.get("type") == "text")
        images = sum(1 for part in last if part.get("type") == "image_url")
        return [f"I see {images} image", "s" if images != 1 else "", f" and you asked: {text.strip()}"], 0.02
    if "markdown" in last:
        return [MARKDOWN_REPLY[i:i + 40] for i in range(0, len(MARKDOWN_REPLY), 40)], 0.01
    if "slow" in last:
        return [word + " " for word in SLOW_WORDS], 0.15
    return ["Hello ", "there, ", "friend. ", "How can I help?"], 0.08


async def think_and_call_a_tool(response: web.StreamResponse) -> None:
    """Reasoning first, then a call of the AI core's `get_current_time` tool (its arguments in
    fragments, as real providers send them)."""
    await response.write(sse({"role": "assistant", "reasoning_content": "Let me think. "}))
    await response.write(sse({"reasoning_content": "The clock will know."}))
    await response.write(sse({"content": None, "tool_calls": [
        {"index": 0, "id": "call_time", "type": "function", "function": {"name": "get_current_time", "arguments": ""}}]}))
    for fragment in ['{"timez', 'one": "UTC"}']:
        await response.write(sse({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}))
    await response.write(sse({}, "tool_calls"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()


async def search_the_knowledge(response: web.StreamResponse, question: str) -> None:
    """A call of `search_knowledge` (the knowledge_tools plugin, where the AI core has it) with
    the person's question."""
    arguments = json.dumps({"query": question})
    await response.write(sse({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_kb", "type": "function", "function": {"name": "search_knowledge", "arguments": arguments}}]}))
    await response.write(sse({}, "tool_calls"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()


def answer_from_passages(result: dict) -> list[str]:
    """The reply to a `search_knowledge` result: the first passage and its document."""
    passages = result.get("passages") or []
    if not passages:
        return [result.get("message") or result.get("error") or "nothing found"]
    first = passages[0]
    return [" ".join(first["text"].split()), f" (from “{first['document_title']}”)"]


DOOR_REQUEST = "open the door for the cleaner"


async def unlock_the_front_door(response: web.StreamResponse) -> None:
    """A call of `operate_device` (the device_tools plugin, where the AI core has it) unlocking
    the front door: one that waits for the person's confirmation."""
    arguments = json.dumps({"device": "front door lock", "action": "switch", "value": False})
    await response.write(sse({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_door", "type": "function", "function": {"name": "operate_device", "arguments": arguments}}]}))
    await response.write(sse({}, "tool_calls"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    pieces, pause = reply_for(body["messages"])
    if pieces == [f'Title: "{TRIP_TITLE}."']:
        await asyncio.wait_for(TRIP_TITLE_GATE.wait(), 30)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    last = body["messages"][-1]
    if last.get("role") == "user" and "what time" in str(last.get("content")):
        await think_and_call_a_tool(response)
        return response
    if last.get("role") == "user" and "what does the report say" in str(last.get("content")):
        await search_the_knowledge(response, str(last["content"]))
        return response
    if last.get("role") == "user" and DOOR_REQUEST in str(last.get("content")):
        await unlock_the_front_door(response)
        return response
    if last.get("role") == "tool" and last.get("tool_call_id") == "call_kb":
        pieces = answer_from_passages(json.loads(last["content"]))
    elif last.get("role") == "tool" and last.get("tool_call_id") == "call_door":
        pieces = ["The front door: ", json.loads(last["content"]).get("status", "?"), "."]
    elif last.get("role") == "tool":
        pieces = ["The clock says ", json.loads(last["content"]).get("time", "?"), "."]
    await response.write(sse({"role": "assistant", "content": ""}))
    for piece in pieces:
        await asyncio.sleep(pause)
        await response.write(sse({"content": piece}))
    await response.write(sse({}, "stop"))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


SPOKEN_TEXT = "turn on the lights"


class AnyAudioVoiceService(FakeVoiceService):
    """The voice service's stand-in, hearing the same sentence in whatever a browser's fake
    microphone records (its bytes cannot be known in advance)."""

    def recognise(self, audio: bytes, language: str) -> tuple[str, str]:
        return (SPOKEN_TEXT if audio else ""), "en"

    def interim(self, received: bytes) -> str:
        return SPOKEN_TEXT[:7] if received else ""


@dataclass
class Services:
    frontend_url: str
    gateway_url: str
    database_url: str = ""
    gateway: web.Application | None = None  # the gateway itself (its hub closes sockets as a restart does)


async def start(app: web.Application, port: int = 0) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def services(postgres_server, tmp_path_factory):
    database = postgres_server.create_database()
    data = tmp_path_factory.mktemp("web-client")
    gateway_port = free_port()
    gateway_url = f"http://127.0.0.1:{gateway_port}"

    def config(**overrides) -> Config:
        return Config.load(overrides={
            "core.data_dir": str(data), "auth.admin_username": "admin", "auth.admin_password": TEST_ADMIN_PASSWORD,
            "auth.jwt_secret": "test-jwt-secret-" + "x" * 32, "auth.service_token": SERVICE_TOKEN,
            "database.url": postgres_server.database_url(database), "fetch.model_hosts": ["127.0.0.1"],
            "peers.gateway_url": gateway_url,
            # The household's people (test_people.py) chat too, not only the administrator.
            "auth.chat_for_all_users": True, **overrides}, environ={})

    runners = []
    try:
        model = web.Application()
        model.router.add_post("/v1/chat/completions", completions)
        runner, model_port = await start(model)
        runners.append(runner)
        voice = AnyAudioVoiceService()
        runner, voice_port = await start(voice.app)
        runners.append(runner)
        ai_core = create_app("ai-core", config(**{"plugins.ai_core": {"timezone": "UTC"}}),
                             plugins=[tokens_plugin, ai_core_plugin, titles_plugin])
        runner, ai_core_port = await start(ai_core)
        runners.append(runner)
        ai_core_url = f"http://127.0.0.1:{ai_core_port}"
        await route_to_model(ai_core_url, f"http://127.0.0.1:{model_port}/v1",
                             {"Authorization": f"Bearer {SERVICE_TOKEN}"}, purposes=("chat", "vision"))
        gateway = create_app("gateway", config(**{"peers.ai_core_url": ai_core_url,
                                                  "peers.voice_service_url": f"http://127.0.0.1:{voice_port}",
                                                  "plugins.chat": {"sweep_interval": 0.5, "stop_timeout": 2},
                                                  # Every test signs in afresh, all from 127.0.0.1.
                                                  "plugins.auth": {"rate_limit_per_minute": 1000}}),
                             plugins=[tokens_plugin, auth_plugin, sessions_plugin, files_plugin,
                                      notifications_plugin, reminders_plugin, ai_core_client_plugin, chat_plugin,
                                      voice_plugin])
        runner, _ = await start(gateway, gateway_port)
        runners.append(runner)
        runner, frontend_port = await start(create_app("frontend", config(), plugins=[frontend_plugin]))
        runners.append(runner)
        yield Services(frontend_url=f"http://127.0.0.1:{frontend_port}", gateway_url=gateway_url,
                       database_url=postgres_server.database_url(database), gateway=gateway)
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
        postgres_server.drop_database(database)


@pytest.fixture
def admin_password() -> str:
    return TEST_ADMIN_PASSWORD
