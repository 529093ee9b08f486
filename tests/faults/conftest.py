"""Fault tests: a component of a running chat turn is killed with SIGKILL (no shutdown code of
it runs) in the middle of a reply. Each test checks what docs/operations.md promises: the
device is told within seconds, no acknowledged message is lost or stored twice, and the next
turn works soon after the component is back.

The chat set-up is tests/chat's (the real gateway and AI core, the scripted model); the
gateway instances in child processes are tests/chat/test_failover.py's."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from gateway.config import PROJECT_ROOT
from plugins.sessions.contract import CONVERSATIONS
# The chat tests' fixtures, used here as they are.
from tests.chat.conftest import (ADMIN, SERVICE_TOKEN, ai_core_url, chat_settings, context_of, eventually,  # noqa: F401
                                 gateway_port, make_gateway, provider, receive_until)
from tests.chat.test_failover import spawn_instance, two_instances  # noqa: F401
from tests.support.fake_openai import route_to_model

# What each test promises (the numbers): the device is told within this many seconds ...
TOLD_WITHIN = 5.0
# ... and the next turn works within this many seconds of the component's return.
RECOVERED_WITHIN = 30.0


async def until_reply_ends(ws, timeout: float = TOLD_WITHIN) -> tuple[list[dict], float]:
    """The frames up to the reply's stream_end, and how long they took: the end of a reply cut
    off by a failure is what tells the device (with an `error` frame before it)."""
    started = time.monotonic()
    try:
        frames = await receive_until(ws, "stream_end", timeout=timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"the device was told nothing within {timeout:g}s") from None
    return frames, time.monotonic() - started


def assert_cut_off_cleanly(frames: list[dict], error_types: set[str]) -> None:
    """A reply ended by a failure: an `error` frame of one of `error_types`, then the stream_end
    (`finish_reason: "error"`) carrying the text that had arrived."""
    end = frames[-1]
    assert end["type"] == "stream_end" and end["finish_reason"] == "error", frames
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert [frame.get("errorType") for frame in errors] and {frame.get("errorType") for frame in errors} <= error_types, \
        errors
    assert end["text"] == "".join(frame["content"] for frame in frames if frame["type"] == "stream_chunk")


@pytest.fixture
def fault_settings() -> dict:
    """Chat settings for the fault tests: a lost lock found soon, the sweeper looking often."""
    return {"lock_ttl": 3.0, "sweep_interval": 0.5}


# The AI core and the model server in processes of their own, so that they can die the way a
# process dies: built like the in-process ones (the production factory; tests/chat's model).
AI_CORE_MAIN = """
import json, sys
from aiohttp import web
from gateway.app import create_app
from gateway.config import Config
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin

app = create_app("ai-core", Config(json.loads(sys.argv[1])), plugins=[tokens_plugin, ai_core_plugin])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), print=None)
"""

# tests/chat's scripted model, holding its reply after two pieces when the message is "hold".
MODEL_MAIN = """
import sys
from aiohttp import web
from tests.chat.conftest import ScriptedProvider

class Model(ScriptedProvider):
    async def completions(self, request):
        held = (await request.json())["messages"][-1]["content"] == "hold"
        self.gate.clear() if held else self.gate.set()
        return await super().completions(request)

web.run_app(Model().app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""
MODEL_REPLY = "Hello there, friend."  # ScriptedProvider's


class ChildService:
    """A service in a child process on a fixed port: started, killed with SIGKILL, started again."""

    def __init__(self, main: str, arguments: list[str], port: int, log: Path, ready_path: str):
        self.main, self.arguments, self.port, self.log, self.ready_path = main, arguments, port, log, ready_path
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        with self.log.open("ab") as output:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", self.main, *self.arguments, cwd=PROJECT_ROOT, stdout=output,
                stderr=subprocess.STDOUT)

        async def answers() -> bool:
            assert self.process is not None and self.process.returncode is None, \
                self.log.read_text(errors="replace")[-3000:]
            try:
                async with aiohttp.ClientSession() as http, http.get(self.url + self.ready_path) as answer:
                    return answer.status < 500
            except aiohttp.ClientConnectionError:
                return False

        await eventually(answers, timeout=30)

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        await asyncio.wait_for(self.process.wait(), 10)


@pytest.fixture
async def child_services(tmp_path):
    """Start ChildServices; whatever still runs is killed at the end."""
    started: list[ChildService] = []

    async def start(main: str, arguments: list[str], port: int, ready_path: str) -> ChildService:
        service = ChildService(main, arguments, port, tmp_path / f"child-{len(started)}.log", ready_path)
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        if service.process is not None and service.process.returncode is None:
            service.process.kill()
            await service.process.wait()


async def configure_ai_core(base_url: str, model_url: str) -> None:
    """Route the AI core's chat to the model at `model_url` (an OpenAI-compatible `/v1`)."""
    await route_to_model(base_url, model_url, {"Authorization": f"Bearer {SERVICE_TOKEN}"})


async def run_a_turn(ws, content: str, timeout: float = 10.0) -> list[dict]:
    await ws.send_json({"type": "message", "content": content, "client_msg_id": content})
    return await receive_until(ws, "stream_end", timeout=timeout)


async def stored_messages(gateway, session_id: str) -> list[tuple[str, str]]:
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    return [(m["role"], m["content"]) for m in await conversations.all_messages(ADMIN.user_id, session_id)]
