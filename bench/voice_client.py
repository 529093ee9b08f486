"""What a device does in the voice timings, here and in the `--base` comparison alike: the secrets
the servers are started with, an utterance to stream, and the frames sent and awaited over
/ws/chat."""
from __future__ import annotations

import asyncio
import base64
import io
import sys
import time
import wave
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
JWT_SECRET = "bench-voice-jwt-secret-" + "v" * 32
SERVICE_TOKEN = "bench-voice-service-token"
FIRST_SENTENCE = "Here is the first sentence of the answer. "
UTTERANCE = "Please tell me what the weather will be like in Beijing tomorrow."


def admin_token() -> str:
    sys.path.insert(0, str(ROOT))
    from gateway.identity import Identity
    from plugins.auth.tokens import JwtTokens

    return JwtTokens(JWT_SECRET).issue_access(Identity(user_id="admin", username="admin", is_admin=True))[0]


async def utterance(http: aiohttp.ClientSession, voice_url: str, spoken: bool) -> tuple[bytes, int]:
    """A WAV of about 3 s: the service's own voice saying UTTERANCE when it has one, else silence;
    and the bytes of 100 ms of it."""
    audio = b""
    if spoken:
        async with http.post(voice_url + "/api/v1/tts", json={"text": UTTERANCE, "language": "en", "format": "wav"},
                             headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}) as response:
            if response.status == 200:
                audio = await response.read()
    if not audio:
        out = io.BytesIO()
        with wave.open(out, "wb") as writer:
            writer.setnchannels(1)
            writer.setsampwidth(2)
            writer.setframerate(16000)
            writer.writeframes(b"\0\0" * 48000)
        audio = out.getvalue()
    with wave.open(io.BytesIO(audio)) as reader:
        per_100ms = reader.getframerate() // 10 * reader.getsampwidth() * reader.getnchannels()
    return audio, per_100ms


def with_silence(audio: bytes, milliseconds: int) -> bytes:
    """The WAV with silence after the speech: a person lets go of the button a moment after."""
    with wave.open(io.BytesIO(audio)) as reader:
        params, frames = reader.getparams(), reader.readframes(reader.getnframes())
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setparams(params)
        writer.writeframes(frames + b"\0" * (params.framerate * milliseconds // 1000 * params.sampwidth
                                              * params.nchannels))
    return out.getvalue()


async def frame_of(ws, kind: str, timeout: float = 60) -> tuple[dict, float]:
    while True:
        frame = await ws.receive_json(timeout=timeout)
        if frame["type"] == kind:
            return frame, time.perf_counter()
        if frame["type"] == "error":
            raise SystemExit(f"error frame: {frame}")


async def stream_once(ws, audio: bytes, per_100ms: int) -> float:
    """Stream the utterance at the pace of speech; seconds from voice_stream_end to voice_final."""
    await ws.send_json({"type": "voice_stream_start", "format": "wav", "language": "en", "mode": "text"})
    await frame_of(ws, "voice_interim")
    for sequence, start in enumerate(range(0, len(audio), per_100ms)):
        await ws.send_json({"type": "voice_stream_chunk", "sequence": sequence,
                            "audio_data": base64.b64encode(audio[start:start + per_100ms]).decode()})
        await asyncio.sleep(0.1)
    ended = time.perf_counter()
    await ws.send_json({"type": "voice_stream_end"})
    final, arrived = await frame_of(ws, "voice_final")
    if final["text"]:
        await frame_of(ws, "stream_end")  # its turn, before the next stream
    return arrived - ended


async def first_segment(ws) -> float:
    await ws.send_json({"type": "message", "content": "Say something.", "mode": "voice_msg"})
    while True:
        frame = await ws.receive_json(timeout=60)
        if frame["type"] == "stream_chunk" and frame["content"] == FIRST_SENTENCE:
            complete = time.perf_counter()
        elif frame["type"] == "stream_segments":
            seconds = time.perf_counter() - complete
            await frame_of(ws, "stream_end")
            return seconds
