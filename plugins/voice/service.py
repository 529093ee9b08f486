"""The voice service (`voice-service`, plugin `voice_engines`): speech to text, one-shot and
streamed, and text to speech, offline by default (docs/voice.md, "The voice service").
The endpoints live by concern: `transcription` (one-shot), `ws_session` (streamed), `synthesis`
(text to speech); the recognition core in `recognition`."""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, AsyncIterator

from aiohttp import web

from gateway.context import Context
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar

from . import synthesis, transcription, ws_session
from .engines.registry import Engines
from .recognition import SERVICE, VoiceService
from .schemas import VoiceStatus
from .settings import VoiceEngineSettings

routes = web.RouteTableDef()


# ------------------------------------------------------------------ status

@routes.get("/api/v1/status", name="voice.status")
@api_doc("Which engines recognise and speak which languages, their models, and the sample rate",
         responses={200: VoiceStatus})
async def status(request: web.Request) -> web.Response:
    await require_user(request)
    engines = request.config_dict[SERVICE].engines
    return web.json_response({"stt": engines.stt_status(), "tts": engines.tts_status()})


# ------------------------------------------------------------------ the plugin

class EngineHttpOf:
    """The service's one HTTP session, for network engines, once it exists."""

    def __init__(self, context: Context):
        self._context = context

    @property
    def http(self) -> Any:
        return self._context.http


class VoiceEnginesPlugin(Plugin):
    name = "voice_engines"
    depends = ("auth_tokens",)
    description = "Speech to text (one-shot and streamed) and text to speech, offline engines by default"
    settings_class = VoiceEngineSettings

    def setup(self, registrar: Registrar[VoiceEngineSettings]) -> None:
        settings = dataclasses.replace(registrar.settings, model_directory=registrar.settings.model_directory
                                       or str(registrar.context.config.data_dir / "models"))
        engines = Engines.build(settings, EngineHttpOf(registrar.context))
        service = VoiceService(engines, settings, asyncio.Semaphore(settings.recognitions_at_once))
        registrar.routes(routes)
        registrar.routes(transcription.routes)
        registrar.routes(ws_session.routes)
        registrar.routes(synthesis.routes)
        registrar.app_state(SERVICE, service)

        async def load_engines(context: Context) -> AsyncIterator[None]:
            await engines.load()
            yield

        registrar.lifespan(load_engines)


plugin = VoiceEnginesPlugin()
