"""The gateway as a client *of* the voice service (`peers.voice_service_url`,
VOICE_SERVICE_URL), over the core's peer transport (gateway/peers.py): one-shot calls, and the
streaming recognition WebSocket, with the service credential. One timeout policy
([plugins.voice]: `connect_timeout`, `timeout`); every way of not getting a usable answer (no
URL, unreachable, past the time limit, our credential refused, an error without the spec's
body) is `VoiceUnavailable`, 502 `voice_service_unreachable`; the service's own error body is a
`VoiceRefused` with its status."""
from __future__ import annotations

import asyncio
import io
import json

import aiohttp

from gateway.peers import PeerAnswer, PeerClient, PeerContext, PeerFailed, PeerTimeout

PEER = "voice_service"
STREAM_PATH = "/api/v1/transcribe/stream"


class VoiceRefused(PeerFailed):
    """The voice service answered with an error body (a bad request of ours, or the caller's)."""
    status = 400
    error_type = "voice_service_failed"


class VoiceUnavailable(PeerFailed):
    """The voice service cannot be used now (not reached, our credential refused, no usable answer)."""
    error_type = "voice_service_unreachable"


class VoiceServiceClient(PeerClient):
    def __init__(self, context: PeerContext, *, timeout: float, connect_timeout: float):
        super().__init__(context, PEER, service="voice service", unreachable=VoiceUnavailable, refused=VoiceRefused,
                         timeout=PeerTimeout(connect=connect_timeout, total=timeout))

    async def transcribe(self, audio: bytes, *, user_id: str, language: str = "auto",
                         audio_format: str | None = None, filename: str = "audio",
                         content_type: str = "application/octet-stream") -> PeerAnswer:
        """The service's answer, a transcription or its error body. `user_id`: whom it is for,
        as the service's STT log (`voice.stt`) records it."""
        form = aiohttp.FormData()
        form.add_field("audio", io.BytesIO(audio), filename=filename, content_type=content_type)
        form.add_field("language", language)
        form.add_field("user_id", user_id)
        if audio_format:
            form.add_field("format", audio_format)
        return await self.request("POST", "/api/v1/transcribe", data=form)

    async def synthesize(self, body: dict) -> PeerAnswer:
        """Audio bytes (2xx) or the service's error answer."""
        return await self.request("POST", "/api/v1/tts", json_body=body)

    async def open_stream(self, language: str, audio_format: str, sample_rate: int | None = None, *,
                          user_id: str) -> aiohttp.ClientWebSocketResponse:
        """A recognition stream that said `ready`; VoiceRefused when the service refused it
        (an unsupported language or format), VoiceUnavailable when it cannot be reached.
        `user_id`: whom it is for, for the service's STT log."""
        params = {"language": language, "format": audio_format, "user_id": user_id}
        if sample_rate:
            params["sample_rate"] = str(sample_rate)
        try:
            ws = await self.connect(STREAM_PATH, params=params, heartbeat=None, max_msg_size=4 * 1024 * 1024)
        except VoiceRefused as error:
            raise VoiceRefused(f"The voice service refused the stream ({error.peer_status}).",
                               "voice_stream_refused", status=400, peer_status=error.peer_status) from None
        try:
            message = await ws.receive(timeout=self.timeout.total)
        except asyncio.TimeoutError:
            await ws.close()
            raise self.unreachable("The voice service did not say its stream was ready in time.") from None
        first = _json_of(message)
        if first.get("type") == "ready":
            return ws
        await ws.close()
        if first.get("type") == "error":
            raise refused(400, first)
        raise self.unreachable("The voice service opened the stream without saying it was ready.")


def refused(status: int, body: dict | None) -> VoiceRefused:
    """The voice service's error body (or a transcription it says failed) with `status`."""
    body = body or {}
    hint = body.get("hint")
    return VoiceRefused(str(body.get("error") or f"The voice service answered {status}."),
                        str(body.get("errorType") or "voice_service_failed"),
                        hint if isinstance(hint, str) else None, status if 400 <= status < 600 else 502,
                        peer_status=status)


def _json_of(message: aiohttp.WSMessage) -> dict:
    if message.type != aiohttp.WSMsgType.TEXT:
        return {}
    try:
        value = json.loads(message.data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
