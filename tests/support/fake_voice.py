"""A small stand-in for the voice service, speaking its wire API (docs/voice.md, "The voice
service"): health, status, one-shot transcription, the streaming recognition WebSocket, speech
synthesis, voices. It recognises the recordings a test registers (`transcripts`: audio bytes →
text, language) and synthesizes silence of 40 ms per character, so tests of the gateway run
without the speech engines. The real service is tested by itself (tests/voice) and end to end."""
from __future__ import annotations

import asyncio
import io
import json
import wave

from aiohttp import WSMsgType, web

SERVICE_TOKEN = "test-service-token"
LANGUAGES = ("zh", "en", "auto")
FORMATS = ("webm", "wav", "pcm", "opus", "ogg")


def silence_wav(milliseconds: int, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(b"\0\0" * (rate * milliseconds // 1000))
    return out.getvalue()


class FakeVoiceService:
    url = ""  # set once it listens

    def __init__(self, service_token: str | None = SERVICE_TOKEN) -> None:
        self.service_token = service_token  # None: any bearer credential (a service whose token is generated)
        self.transcripts: dict[bytes, tuple[str, str]] = {}
        self.tts_requests: list[dict] = []
        self.tts_delay: dict[str, float] = {}  # text -> seconds its synthesis takes
        self.tts_failing = False
        self.final_delay = 0.0
        self.open_streams = 0
        self.streams_opened = 0
        self.stream_audio: list[bytes] = []  # each finished stream's audio
        self.users: list[str] = []  # whom each recognition was for (the service's STT log records it)
        self.app = web.Application()
        self.app.router.add_get("/api/v1/health", self.health)
        self.app.router.add_get("/api/v1/status", self.status)
        self.app.router.add_post("/api/v1/transcribe", self.transcribe)
        self.app.router.add_get("/api/v1/transcribe/stream", self.stream)
        self.app.router.add_post("/api/v1/tts", self.tts)
        self.app.router.add_get("/api/v1/tts/voices", self.voices)
        self.app.router.add_get("/api/v1/tts/status", self.tts_status)

    def authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        if self.service_token is None:
            return header.startswith("Bearer ") and len(header) > len("Bearer ")
        return header == f"Bearer {self.service_token}"

    @staticmethod
    def error(status: int, error: str, error_type: str, **extra) -> web.Response:
        return web.json_response({"error": error, "errorType": error_type, "hint": "", **extra}, status=status)

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def status(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return self.error(401, "no credential", "unauthorized")
        return web.json_response({
            "stt": {"engines": [{"name": "fake", "languages": ["en", "zh"], "model": "fixed", "loaded": True}],
                    "default_engine": "fake", "languages": ["en", "zh"], "sample_rate": 16000},
            "tts": {"engines": [{"name": "fake-tts", "languages": ["en", "zh"]}], "voices": 2,
                    "languages": ["en", "zh"]}})

    def recognise(self, audio: bytes, language: str) -> tuple[str, str]:
        text, spoken = self.transcripts.get(audio, ("", language if language != "auto" else "en"))
        return text, spoken

    async def transcribe(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return self.error(401, "no credential", "unauthorized")
        form = await request.post()
        audio_field = form.get("audio")
        language = str(form.get("language") or "auto")
        if language not in LANGUAGES:
            return self.error(422, f"no engine recognises {language!r}", "language_unsupported", success=False)
        if audio_field is None or not hasattr(audio_field, "file"):
            return self.error(400, "no audio", "validation_error", success=False)
        audio = audio_field.file.read()
        self.users.append(str(form.get("user_id") or ""))
        if audio == b"garbage":
            return self.error(400, "the audio cannot be decoded", "undecodable_audio", success=False)
        text, spoken = self.recognise(audio, language)
        return web.json_response({"success": True, "text": text, "language": spoken, "duration_ms": 1000,
                                  "engine": "fake", "processing_ms": 5})

    async def stream(self, request: web.Request) -> web.WebSocketResponse:
        if not self.authorized(request):
            return self.error(401, "no credential", "unauthorized")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        language, audio_format = request.query.get("language", "auto"), request.query.get("format", "webm")
        if language not in LANGUAGES or audio_format not in FORMATS:
            await ws.send_json({"type": "error", "error": f"no engine recognises {language!r}"
                                if language not in LANGUAGES else f"format {audio_format!r} is not supported",
                                "errorType": "language_unsupported" if language not in LANGUAGES
                                else "unsupported_format"})
            await ws.close()
            return ws
        self.open_streams += 1
        self.streams_opened += 1
        self.users.append(request.query.get("user_id", ""))
        received = b""
        try:
            await ws.send_json({"type": "ready"})
            async for message in ws:
                if message.type == WSMsgType.BINARY:
                    received += message.data
                    text = self.interim(received)
                    if text:
                        await ws.send_json({"type": "interim", "text": text})
                elif message.type == WSMsgType.TEXT and json.loads(message.data).get("type") == "stop":
                    await asyncio.sleep(self.final_delay)
                    text, spoken = self.recognise(received, language)
                    self.stream_audio.append(received)
                    await ws.send_json({"type": "final", "text": text, "language": spoken,
                                        "duration_ms": 3000, "engine": "fake"})
                    break
        finally:
            self.open_streams -= 1
            await ws.close()
        return ws

    def interim(self, received: bytes) -> str:
        """The known recording this is the start of: as much of its text as audio came."""
        for audio, (text, _) in self.transcripts.items():
            if audio.startswith(received):
                return text[:max(1, len(text) * len(received) // len(audio))]
        return ""

    async def tts(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return self.error(401, "no credential", "unauthorized")
        body = await request.json()
        self.tts_requests.append(body)
        text = str(body.get("text") or "")
        if not text.strip():
            return self.error(400, "text is required", "validation_error")
        if body.get("language") == "ja":
            return self.error(422, "no voice speaks 'ja'", "language_unsupported")
        await asyncio.sleep(self.tts_delay.get(text, 0))
        if self.tts_failing:
            return self.error(500, "the synthesis engine crashed", "synthesis_failed")
        milliseconds = 40 * len(text)
        return web.Response(body=silence_wav(milliseconds), content_type="audio/wav",
                            headers={"X-Audio-Duration-Ms": str(milliseconds)})

    async def voices(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return self.error(401, "no credential", "unauthorized")
        voices = [{"id": "en-fake", "name": "Fake English", "language": "en", "engine": "fake-tts", "sample_rate": 16000},
                  {"id": "zh-fake", "name": "Fake Mandarin", "language": "zh", "engine": "fake-tts",
                   "sample_rate": 16000}]
        return web.json_response({"voices": voices, "count": len(voices)})

    async def tts_status(self, request: web.Request) -> web.Response:
        if not self.authorized(request):
            return self.error(401, "no credential", "unauthorized")
        return web.json_response({"engines": [{"name": "fake-tts", "languages": ["en", "zh"]}],
                                  "default_voices": {"en": "en-fake", "zh": "zh-fake"}, "ready": True})
