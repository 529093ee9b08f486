"""The thinking job (plugin `thinking`) in a real gateway, with a real AI core and a real memory
service on loopback ports and real PostgreSQL; the language model is a small OpenAI-compatible
server that answers chat turns with text and the thinking request with the JSON it asks for.
Time is moved by an injected clock, never waited for.

A person chats over `/ws/chat`; one interval later the job reflects over that conversation and
the person's memories, writes an entry to the thinking log and pushes `background_thinking`
(started, finished) and `thinking` (the thought) to the connected device, each frame fitting the
gateway's AsyncAPI document. Not without a model, not beyond the daily bound, not when off."""
from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from aiohttp import web

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.memory import client_plugin as memory_client_plugin
from plugins.memory.thinking import ThinkingPlugin
from plugins.sessions import plugin as sessions_plugin
from tests.ai_core.conftest import SERVICE, access_token
from tests.memory.conftest import remember, url_of
from tests.support.asyncapi import FrameChecker

HOUR = 3600.0
DAY = 24 * HOUR
INTERVAL = HOUR
THOUGHT = {"noticed": "Alice is vegetarian and her sister Lena visits on Friday.",
           "suggestion": "Offer a vegetarian dinner menu for Lena's visit."}


class ManualClock:
    """The job's clock: real time plus an offset the test moves on. `advance` returns once the
    job has run and sleeps again."""

    def __init__(self):
        # It starts at noon (UTC) of today, whatever the real hour: the daily bound counts the
        # entries of the clock's UTC day, and the memory service stamps entries with the real
        # time, so a test run just before midnight would otherwise see a new day after an hour.
        now = time.time()
        self.offset = (now // DAY) * DAY + DAY / 2 - now
        self.sleeps = 0
        self._condition: asyncio.Condition | None = None

    @property
    def condition(self) -> asyncio.Condition:
        if self._condition is None:
            self._condition = asyncio.Condition()
        return self._condition

    def now(self) -> float:
        return time.time() + self.offset

    async def sleep(self, seconds: float) -> None:
        deadline = self.now() + seconds
        async with self.condition:
            self.sleeps += 1
            self.condition.notify_all()
            await self.condition.wait_for(lambda: self.now() >= deadline)

    async def advance(self, seconds: float, timeout: float = 60.0) -> None:
        async with self.condition:
            await asyncio.wait_for(self.condition.wait_for(lambda: self.sleeps > 0), timeout)
            before = self.sleeps
            self.offset += seconds
            self.condition.notify_all()
            await asyncio.wait_for(self.condition.wait_for(lambda: self.sleeps > before), timeout)


def sse(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-thinking", "object": "chat.completion.chunk", "created": 1, "model": "thoughtful",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class ThoughtfulModel:
    """`/v1/chat/completions`: the thinking request (it asks for a JSON object) gets `THOUGHT`,
    any other turn a short reply."""

    def __init__(self):
        self.url = ""
        self.requests: list[dict] = []
        self.fail_thinking = False
        self.thought = THOUGHT
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)

    def thinking_requests(self) -> list[dict]:
        return [r for r in self.requests if "thinking privately" in r["messages"][-1]["content"]]

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        last = body["messages"][-1]["content"]
        if self.fail_thinking and "thinking privately" in last:
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        text = json.dumps(self.thought) if "thinking privately" in last else "Noted, thank you!"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse({"role": "assistant", "content": ""}))
        for start in range(0, len(text), 16):
            await response.write(sse({"content": text[start:start + 16]}))
        await response.write(sse({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


class Setup:
    def __init__(self, gateways: list, memory_service, clocks: list[ManualClock], model: ThoughtfulModel):
        self.gateways, self.memory_service, self.clocks, self.model = gateways, memory_service, clocks, model
        self.gateway, self.clock = gateways[0], clocks[0]

    async def entries(self, user_id: str = "user_alice") -> list[dict]:
        response = await self.memory_service.get("/api/v1/thinking", headers=SERVICE, params={"user_id": user_id})
        assert response.status == 200, await response.text()
        return (await response.json())["entries"]

    async def connect(self, user_id: str = "user_alice", username: str = "alice", session: str = "dinner",
                      instance: int = 0):
        token = access_token(user_id, username)
        return await self.gateways[instance].ws_connect(f"/ws/chat?token={token}&session_id={session}&client_id=phone")


@pytest.fixture
def thinking_model():
    return ThoughtfulModel()


@pytest.fixture
async def make_setup(database_url, aiohttp_server, aiohttp_client, make_config, make_memory_service, thinking_model):
    async def build(model: bool = True, thinking: dict | None = None, instances: int = 1,
                    bus: dict | None = None) -> Setup:
        memory_service = await make_memory_service()
        base = {"database.url": database_url, "auth.chat_for_all_users": True, **(bus or {}),
                "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "timezone": "UTC"}}
        ai_core = await aiohttp_server(create_app("ai-core", make_config(base), plugins=[tokens_plugin, ai_core_plugin]))
        ai_core_url = str(ai_core.make_url("")).rstrip("/")
        if model:
            server = await aiohttp_server(thinking_model.app)
            thinking_model.url = str(server.make_url("/v1")).rstrip("/")
            async with aiohttp.ClientSession(headers=SERVICE) as http:
                for path, body in [
                        ("/api/v1/models/providers/local", {"base_url": thinking_model.url, "api_key": "key"}),
                        ("/api/v1/models/models/thoughtful", {"name": "thoughtful", "provider": "local",
                                                              "tags": ["chat"]})]:
                    async with http.post(ai_core_url + path, json=body) as response:
                        assert response.status == 200, await response.text()
        config = make_config({**base, "peers.ai_core_url": ai_core_url,
                              "peers.memory_service_url": url_of(memory_service),
                              "plugins.thinking": {"interval": INTERVAL, **(thinking or {})}})
        clocks = [ManualClock() for _ in range(instances)]
        gateways = [await aiohttp_client(create_app("gateway", config, plugins=[
            tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin, memory_client_plugin,
            ThinkingPlugin(clock=clock)])) for clock in clocks]
        return Setup(gateways, memory_service, clocks, thinking_model)
    return build


async def frames_until(ws, kind: str, checker: FrameChecker | None = None, timeout: float = 30.0) -> list[dict]:
    frames = []
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), timeout)
        if checker is not None:
            checker.check(frame)
        frames.append(frame)
        if frame["type"] == kind:
            return frames


async def chat(ws, text: str, client_msg_id: str) -> None:
    await ws.send_json({"type": "message", "content": text, "client_msg_id": client_msg_id})
    await frames_until(ws, "stream_end")


async def nothing_pushed(ws, wait: float = 0.5) -> None:
    with pytest.raises(asyncio.TimeoutError):
        frame = await asyncio.wait_for(ws.receive_json(), wait)
        pytest.fail(f"unexpected frame {frame}")


async def test_a_recent_conversation_is_thought_about_written_and_pushed(make_setup):
    setup = await make_setup()
    document = await (await setup.gateway.get("/api/v1/asyncapi.json")).json()
    assert "server.background_thinking" in document["components"]["messages"]
    checker = FrameChecker(document)
    await remember(setup.memory_service, "My sister is called Lena.", category="relationship", priority=8)
    ws = await setup.connect()
    await chat(ws, "I'm vegetarian, and my sister visits on Friday.", "m1")
    laptop = await setup.connect(session="other")

    await setup.clock.advance(INTERVAL)
    phone_frames = await frames_until(ws, "background_thinking", checker)
    assert [f["type"] for f in phone_frames] == ["background_thinking"]
    assert phone_frames[0]["thinking_status"] == "started"
    frames = await frames_until(ws, "thinking", checker) + await frames_until(ws, "background_thinking", checker)
    thought, finished = frames[-2], frames[-1]
    assert thought["msg_type"] == "thinking" and thought["thinking_status"] == "finished"
    assert thought["thinking_content"] == f"{THOUGHT['noticed']}\n\n{THOUGHT['suggestion']}"
    assert finished["thinking_status"] == "finished"
    assert thought["message_id"] == finished["message_id"] == phone_frames[0]["message_id"]
    # Every device of the person gets them.
    laptop_frames = await frames_until(laptop, "thinking", checker)
    assert laptop_frames[-1]["thinking_content"] == thought["thinking_content"]
    assert {"background_thinking", "thinking"} <= set(checker.seen)

    entries = await setup.entries()
    assert len(entries) == 1 and thought["message_id"] == f"thinking_{entries[0]['id']}"
    assert (entries[0]["content"], entries[0]["suggestion"]) == (THOUGHT["noticed"], THOUGHT["suggestion"])
    assert entries[0]["model"] == "thoughtful" and entries[0]["source_session_ids"] == ["dinner"]
    assert len(entries[0]["source_memory_ids"]) == 1
    # The model read the conversation and the memory, and was offered no tools.
    [request] = setup.model.thinking_requests()
    prompt = request["messages"][-1]["content"]
    assert "I'm vegetarian, and my sister visits on Friday." in prompt and "My sister is called Lena." in prompt
    assert "Noted, thank you!" in prompt and "tools" not in request
    # The timeline shows the memory and the thought.
    timeline = await (await setup.memory_service.get("/api/v1/timeline", headers=SERVICE,
                                                     params={"user_id": "user_alice"})).json()
    assert [item["type"] for item in timeline["items"]] == ["thinking", "memory"]

    # Nothing new: the next run thinks nothing.
    await setup.clock.advance(INTERVAL)
    await nothing_pushed(ws)
    assert len(await setup.entries()) == 1 and len(setup.model.thinking_requests()) == 1
    await ws.close()
    await laptop.close()


async def test_no_thought_without_a_model(make_setup):
    setup = await make_setup(model=False)
    ws = await setup.connect()
    await chat(ws, "I'm vegetarian.", "m1")  # answered by the offline agent
    await setup.clock.advance(INTERVAL)
    await nothing_pushed(ws)
    assert await setup.entries() == [] and setup.model.requests == []
    await ws.close()


@pytest.mark.parametrize("model", [False, True])
async def test_the_status_says_plainly_whether_thinking_has_a_model(make_setup, model):
    """The console's Thinking panel and any person may ask: with no model the job never writes,
    and that must be said, not left to an empty list."""
    setup = await make_setup(model=model)
    token = access_token("user_alice", "alice")
    response = await setup.gateway.get("/api/v1/thinking-status", headers={"Authorization": f"Bearer {token}"})
    assert response.status == 200
    status = await response.json()
    assert status["model_configured"] is model and status["interval_seconds"] == INTERVAL
    assert ("needs a language model" in status["message"]) is not model
    assert "`" not in status["message"] and "OPENAI" not in status["message"]
    assert (await setup.gateway.get("/api/v1/thinking-status")).status == 401


async def test_thoughts_are_bounded_per_person_per_day(make_setup):
    setup = await make_setup(thinking={"max_per_user_per_day": 1, "lookback_hours": 48})
    ws = await setup.connect()
    await chat(ws, "I'm vegetarian.", "m1")
    await setup.clock.advance(INTERVAL)
    await frames_until(ws, "thinking")
    await frames_until(ws, "background_thinking")
    assert len(await setup.entries()) == 1

    # New activity, but today's thought is spent.
    await chat(ws, "My sister visits on Friday.", "m2")
    await setup.clock.advance(INTERVAL)
    await nothing_pushed(ws)
    assert len(await setup.entries()) == 1

    # The next day (UTC) it thinks again.
    await setup.clock.advance(24 * HOUR)
    await frames_until(ws, "thinking")
    assert len(await setup.entries()) == 2 and len(setup.model.thinking_requests()) == 2
    await ws.close()


async def test_switched_off_it_never_runs(make_setup):
    setup = await make_setup(thinking={"enabled": False})
    document = await (await setup.gateway.get("/api/v1/asyncapi.json")).json()
    assert "server.background_thinking" not in document["components"]["messages"]
    ws = await setup.connect()
    await chat(ws, "I'm vegetarian.", "m1")
    await nothing_pushed(ws)
    assert setup.clock.sleeps == 0 and await setup.entries() == []
    assert setup.model.thinking_requests() == []
    await ws.close()


async def test_two_gateway_instances_think_once(make_setup, redis_url, bus_prefix):
    setup = await make_setup(instances=2, bus={"bus.redis_url": redis_url, "bus.prefix": bus_prefix})
    phone = await setup.connect(instance=0)
    laptop = await setup.connect(session="other", instance=1)
    await chat(phone, "I'm vegetarian, and my sister visits on Friday.", "m1")
    # Both instances' jobs wake at once; one thinks, the other finds the run taken or the thought written.
    await asyncio.gather(*(clock.advance(INTERVAL) for clock in setup.clocks))
    for ws in (phone, laptop):  # each device gets the frames, whichever instance thought
        assert (await frames_until(ws, "thinking"))[-1]["thinking_content"].startswith(THOUGHT["noticed"])
        assert (await frames_until(ws, "background_thinking"))[-1]["thinking_status"] == "finished"
    await asyncio.gather(*(clock.advance(INTERVAL) for clock in setup.clocks))
    await nothing_pushed(phone)
    assert len(await setup.entries()) == 1 and len(setup.model.thinking_requests()) == 1
    await phone.close()
    await laptop.close()


async def test_a_failed_thought_is_reported_and_tried_again_next_run(make_setup):
    setup = await make_setup()
    ws = await setup.connect()
    await chat(ws, "I'm vegetarian.", "m1")
    setup.model.fail_thinking = True
    await setup.clock.advance(INTERVAL)
    frames = await frames_until(ws, "background_thinking") + await frames_until(ws, "background_thinking")
    assert [f["thinking_status"] for f in frames] == ["started", "failed"] and frames[1]["error"]
    assert await setup.entries() == []

    setup.model.fail_thinking = False
    await setup.clock.advance(INTERVAL)
    await frames_until(ws, "thinking")
    assert len(await setup.entries()) == 1
    await ws.close()


async def test_a_thought_that_noticed_nothing_writes_nothing(make_setup):
    setup = await make_setup()
    setup.model.thought = {"noticed": "", "suggestion": ""}
    ws = await setup.connect()
    await chat(ws, "Hi!", "m1")
    await setup.clock.advance(INTERVAL)
    frames = await frames_until(ws, "background_thinking") + await frames_until(ws, "background_thinking")
    assert [(f["type"], f["thinking_status"]) for f in frames] == [("background_thinking", "started"),
                                                                   ("background_thinking", "finished")]
    assert await setup.entries() == []
    # Nothing new since: not asked again.
    await setup.clock.advance(INTERVAL)
    await nothing_pushed(ws)
    assert len(setup.model.thinking_requests()) == 1
    await ws.close()
