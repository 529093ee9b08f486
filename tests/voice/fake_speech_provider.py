"""A small OpenAI-compatible speech server on a loopback port: `/v1/audio/transcriptions`
(multipart `file`, `model`, optional `language`, `response_format`) and `/v1/audio/speech`
(JSON `model`, `input`, `voice`, `response_format`, `speed`), as the provider's wire protocol
has them. It "recognises" by reporting how long the WAV it got was, so a test can tell the
service sent real audio; it speaks a tone of a length set by the text."""
from __future__ import annotations

import io
import wave

import numpy as np
from aiohttp import web


class FakeSpeechProvider:
    def __init__(self, api_key: str = "provider-key"):
        self.api_key = api_key
        self.requests: list[dict] = []
        self.failing = False
        self.app = web.Application()
        self.app.router.add_post("/v1/audio/transcriptions", self.transcriptions)
        self.app.router.add_post("/v1/audio/speech", self.speech)

    def check(self, request: web.Request) -> None:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            raise web.HTTPUnauthorized(text='{"error": {"message": "bad key"}}', content_type="application/json")
        if self.failing:
            raise web.HTTPInternalServerError(text='{"error": {"message": "overloaded"}}',
                                              content_type="application/json")

    async def transcriptions(self, request: web.Request) -> web.Response:
        self.check(request)
        form = await request.post()
        upload = form["file"]
        assert not isinstance(upload, str)
        with wave.open(io.BytesIO(upload.file.read())) as reader:
            seconds = reader.getnframes() / reader.getframerate()
            rate = reader.getframerate()
        fields = {key: form[key] for key in ("model", "language", "response_format") if key in form}
        self.requests.append({"path": request.path, "fields": fields, "seconds": seconds, "rate": rate})
        return web.json_response({"text": f"heard {seconds:.1f} seconds", "language": "english",
                                  "duration": seconds})

    async def speech(self, request: web.Request) -> web.Response:
        self.check(request)
        body = await request.json()
        self.requests.append({"path": request.path, "body": body})
        seconds = 0.1 * len(body["input"]) / float(body.get("speed", 1.0))
        tone = (0.3 * np.sin(np.arange(int(24000 * seconds)) * 2 * np.pi * 440 / 24000) * 32767).astype("<i2")
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as writer:
            writer.setnchannels(1)
            writer.setsampwidth(2)
            writer.setframerate(24000)
            writer.writeframes(tone.tobytes())
        return web.Response(body=buffer.getvalue(), content_type="audio/wav")
