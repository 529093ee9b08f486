"""The gateway's one way to reach the voice service (`peers.voice_service_url`,
VOICE_SERVICE_URL) with the service credential: one-shot calls, and the streaming recognition
WebSocket. One timeout policy ([plugins.voice]: `connect_timeout`, `timeout`); every way of not
getting a usable answer (no URL, unreachable, past the time limit, our credential refused) is
`VoiceUnavailable`, which the endpoints render as 502 `voice_service_unreachable`."""
from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from gateway.errors import ApiError, BadGateway
from gateway.text import loads_utf8_safe

PEER = "voice_service"


class VoiceUnavailable(BadGateway):
    error_type = "voice_service_unreachable"


class VoiceRefused(ApiError):
    """The voice service answered with an error body (a bad request of ours, or the caller's)."""


@dataclass
class Answer:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str]

    def json(self) -> dict:
        try:
            value: Any = loads_utf8_safe(self.body)
        except ValueError:
            value = None
        return value if isinstance(value, dict) else {}


class VoiceClient:
    def __init__(self, context, *, timeout: float, connect_timeout: float):
        self.context = context
        self.timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self.connect_timeout = connect_timeout

    def base_url(self) -> str:
        url = self.context.peer_url(PEER)
        if not url:
            raise VoiceUnavailable("No address is configured for the voice service.",
                                   hint="Set VOICE_SERVICE_URL ([peers] voice_service_url).")
        return url

    def _unreachable(self, error: BaseException | None = None, status: int | None = None) -> VoiceUnavailable:
        where = self.context.peer_url(PEER) or "(unset)"
        if status in (401, 403):
            return VoiceUnavailable(f"The voice service refused this gateway's credential ({status}).",
                                    hint="SERVICE_TOKEN must be the same for the gateway and the voice-service.")
        detail = f" ({error.__class__.__name__})" if error is not None else ""
        return VoiceUnavailable(f"The voice service cannot be reached or did not answer in time{detail}.",
                                hint=f"Check that the voice-service runs at {where} (VOICE_SERVICE_URL).")

    async def call(self, method: str, path: str, *, json_body: dict | None = None,
                   data: aiohttp.FormData | None = None) -> Answer:
        """The voice service's answer to `method path` (any status but a refused credential)."""
        url = self.base_url() + path
        try:
            async with self.context.http.request(method, url, json=json_body, data=data,
                                                 headers=self.context.peer_headers(),
                                                 timeout=self.timeout) as response:
                body = await response.read()
                answer = Answer(response.status, response.content_type, body, dict(response.headers))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:  # ValueError: a bad URL
            raise self._unreachable(error) from None
        if answer.status in (401, 403):
            raise self._unreachable(status=answer.status)
        if answer.status >= 500 and not answer.json().get("error"):
            raise self._unreachable(status=answer.status)
        return answer

    async def json(self, method: str, path: str, **options) -> dict:
        """A JSON answer of 2xx; VoiceRefused with the service's error body otherwise."""
        answer = await self.call(method, path, **options)
        body = answer.json()
        if answer.status >= 400:
            raise refused(answer.status, body)
        if not body and answer.body.strip() != b"{}":
            raise self._unreachable(status=answer.status)
        return body

    async def transcribe(self, audio: bytes, *, user_id: str, language: str = "auto",
                         audio_format: str | None = None, filename: str = "audio",
                         content_type: str = "application/octet-stream") -> Answer:
        """`user_id`: whom it is for, as the service's STT log (`voice.stt`) records it."""
        form = aiohttp.FormData()
        form.add_field("audio", io.BytesIO(audio), filename=filename, content_type=content_type)
        form.add_field("language", language)
        form.add_field("user_id", user_id)
        if audio_format:
            form.add_field("format", audio_format)
        return await self.call("POST", "/api/v1/transcribe", data=form)

    async def synthesize(self, body: dict) -> Answer:
        """Audio bytes (2xx) or the service's error answer."""
        return await self.call("POST", "/api/v1/tts", json_body=body)

    async def open_stream(self, language: str, audio_format: str, sample_rate: int | None = None, *,
                          user_id: str) -> aiohttp.ClientWebSocketResponse:
        """A recognition stream that said `ready`; VoiceRefused when the service refused it
        (an unsupported language or format), VoiceUnavailable when it cannot be reached.
        `user_id`: whom it is for, for the service's STT log."""
        params = {"language": language, "format": audio_format, "user_id": user_id}
        if sample_rate:
            params["sample_rate"] = str(sample_rate)
        url = self.base_url() + "/api/v1/transcribe/stream"
        try:
            ws = await self.context.http.ws_connect(
                url, params=params, headers=self.context.peer_headers(), heartbeat=None,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=self.connect_timeout),
                max_msg_size=4 * 1024 * 1024)
        except aiohttp.WSServerHandshakeError as error:
            if error.status in (401, 403) or error.status >= 500:
                raise self._unreachable(error, status=error.status) from None
            raise VoiceRefused(f"The voice service refused the stream ({error.status}).",
                               error_type="voice_stream_refused", status=400) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
            raise self._unreachable(error) from None
        try:
            message = await ws.receive(timeout=self.timeout.total)
        except asyncio.TimeoutError:
            await ws.close()
            raise self._unreachable() from None
        first = _json_of(message)
        if first.get("type") == "ready":
            return ws
        await ws.close()
        if first.get("type") == "error":
            raise refused(400, first)
        raise self._unreachable()


def refused(status: int, body: dict) -> VoiceRefused:
    return VoiceRefused(str(body.get("error") or f"The voice service answered {status}."),
                        error_type=str(body.get("errorType") or "voice_service_failed"),
                        hint=body.get("hint"), status=status if 400 <= status < 600 else 502)


def _json_of(message: aiohttp.WSMessage) -> dict:
    if message.type != aiohttp.WSMsgType.TEXT:
        return {}
    try:
        value = json.loads(message.data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
