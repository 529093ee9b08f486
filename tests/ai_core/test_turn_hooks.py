"""The two hooks of a chat turn (TURN_CONTEXT, TURN_FINISHED), through a plugin that uses them as
a feature plugin would, a real ai-core service and the fake OpenAI-compatible provider."""
from __future__ import annotations

import asyncio

import pytest

from gateway.plugins import Plugin
from plugins.ai_core.contract import TURN_CONTEXT, TURN_FINISHED, FinishedTurn
from tests.ai_core.conftest import SERVICE, configure, read_events, text_of


class HookPlugin(Plugin):
    name = "hook_test"
    depends = ("ai_core",)

    def __init__(self):
        self.asked: list[tuple] = []
        self.finished: list[FinishedTurn] = []
        self.told = asyncio.Event()

    def setup(self, registrar):
        context = registrar.context.contracts.require(TURN_CONTEXT)

        async def facts(user_id, session_id, text):
            self.asked.append((user_id, session_id, text))
            return [{"title": "Facts for this turn:", "lines": [f"{user_id} asked about {text}", "line two"]}]

        async def late(user_id, session_id, text):
            await asyncio.sleep(30)
            return [{"title": "Too late:", "lines": ["never shown"]}]

        async def broken(user_id, session_id, text):
            raise RuntimeError("provider bug")

        context.add("facts", facts)
        context.add("late", late)
        context.add("broken", broken)

        async def listener(turn: FinishedTurn) -> None:
            self.finished.append(turn)
            self.told.set()

        registrar.context.contracts.require(TURN_FINISHED).add("recorder", listener)


async def test_context_blocks_reach_the_system_message_and_a_late_or_broken_provider_is_skipped(
        make_ai_core, provider):
    hooks = HookPlugin()
    client = await make_ai_core(hooks, overrides={"plugins.ai_core": {
        "first_token_timeout": 3.0, "idle_timeout": 3, "tool_timeout": 3, "timezone": "UTC",
        "turn_context_timeout": 0.3}})
    await configure(client, provider, {"m1": "plain"}, chain=["m1"])
    response = await client.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": "u1", "session_id": "s1", "text": "dinner ideas",
        "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    events = await read_events(response)
    assert events[-1]["type"] == "done" and text_of(events) == "Hello from upstream-m1."
    assert hooks.asked == [("u1", "s1", "dinner ideas")]
    system = provider.requests[-1]["body"]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].endswith("Facts for this turn:\n- u1 asked about dinner ideas\n- line two")
    assert "never shown" not in system["content"]
    await asyncio.wait_for(hooks.told.wait(), 5)
    turn = hooks.finished[0]
    assert (turn.user_id, turn.session_id, turn.user_text, turn.reply_text, turn.model) == (
        "u1", "s1", "dinner ideas", "Hello from upstream-m1.", "m1")
    assert turn.history == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize("remembers", [False, True])
async def test_the_openai_door_remembers_only_when_configured(make_ai_core, provider, remembers):
    """A request to the OpenAI door is a relayed request (issue 44): no recall before it and no
    listener after it, unless `door_remembers`; then the blocks go in its own system message."""
    hooks = HookPlugin()
    client = await make_ai_core(hooks, overrides={"plugins.ai_core": {
        "first_token_timeout": 3.0, "idle_timeout": 3, "tool_timeout": 3, "turn_context_timeout": 0.3,
        "door_remembers": remembers}})
    await configure(client, provider, {"m1": "plain"}, chain=["m1"])
    response = await client.post("/v1/chat/completions", headers=SERVICE, json={
        "user": "u2", "messages": [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "what should I cook"}]})
    assert response.status == 200, await response.text()
    messages = provider.requests[-1]["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    if remembers:
        assert messages[0]["content"].startswith("Be brief.\n\nFacts for this turn:\n- u2 asked about what should I cook")
        await asyncio.wait_for(hooks.told.wait(), 5)
        assert [t.user_text for t in hooks.finished] == ["what should I cook"]
    else:
        assert messages[0]["content"] == "Be brief."
        await asyncio.sleep(0.2)
        assert hooks.asked == [] and hooks.finished == []


async def test_the_offline_agent_skips_the_providers_and_other_purposes_tell_no_listener(make_ai_core):
    hooks = HookPlugin()
    client = await make_ai_core(hooks)
    events = await read_events(await client.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": "u1", "text": "hello"}))
    assert events[-1]["type"] == "done" and events[-1]["model"] == "offline-agent"
    assert hooks.asked == []  # no model reads them
    await asyncio.wait_for(hooks.told.wait(), 5)
    assert [(t.user_text, t.model) for t in hooks.finished] == [("hello", "offline-agent")]
    events = await read_events(await client.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": "u1", "text": "hello", "purpose": "memory"}))
    assert events[-1]["type"] == "done"
    await asyncio.sleep(0.1)
    assert len(hooks.finished) == 1
