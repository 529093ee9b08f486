"""Fixtures of the gateway's voice tests (tests/voice/test_gateway_*.py): the gateway built by
the production factory with chat and voice, in front of the real AI core (on the scripted
OpenAI-compatible provider of tests/chat) and a voice service: the stand-in of fake_voice.py,
which speaks the voice service's wire API."""
from __future__ import annotations

import asyncio
import base64

import pytest

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.voice.gateway import plugin as voice_plugin
from tests.chat.conftest import (ADMIN, ALICE, BOB, ai_core_url, chat_settings, context_of, gateway_port,  # noqa: F401
                                 provider, receive_until, token_for)
from tests.support.fake_voice import FakeVoiceService
from tests.support.servers import free_port

__all__ = ["ADMIN", "ALICE", "BOB", "ai_core_url", "chat_settings", "context_of", "gateway_port", "provider",
           "receive_until", "token_for", "fake_voice", "make_voice_gateway", "voice_gateway", "ws_path", "b64",
           "frames_until", "no_frame_within"]


@pytest.fixture
async def fake_voice(aiohttp_server):
    service = FakeVoiceService()
    server = await aiohttp_server(service.app)
    service.url = str(server.make_url("")).rstrip("/")
    return service


@pytest.fixture
def make_voice_gateway(database_url, ai_core_url, aiohttp_client, make_config, chat_settings):  # noqa: F811
    """`voice_url`: where the voice service is (default: the stand-in); `voice`: [plugins.voice]."""
    async def build(voice_url: str, voice: dict | None = None, overrides: dict | None = None):
        config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                              "peers.voice_service_url": voice_url, "plugins.chat": chat_settings,
                              "plugins.voice": {"connect_timeout": 2, "timeout": 10, **(voice or {})},
                              **(overrides or {})})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, files_plugin,
                                                     ai_core_client_plugin, chat_plugin, voice_plugin])
        return await aiohttp_client(app)
    return build


@pytest.fixture
async def voice_gateway(make_voice_gateway, fake_voice):
    return await make_voice_gateway(fake_voice.url)


def unreachable_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def ws_path(client, identity=ADMIN, **query) -> str:
    params = {"token": token_for(client, identity), **query}
    return "/ws/chat?" + "&".join(f"{key}={value}" for key, value in params.items())


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def frames_until(ws, kind: str, timeout: float = 10.0) -> list[dict]:
    """Frames up to and including the first of type `kind`."""
    return await receive_until(ws, kind, timeout)


async def no_frame_within(ws, seconds: float) -> None:
    """Nothing arrives for `seconds` (a frame that should not come)."""
    try:
        frame = await asyncio.wait_for(ws.receive_json(), seconds)
    except asyncio.TimeoutError:
        return
    raise AssertionError(f"unexpected frame {frame}")
