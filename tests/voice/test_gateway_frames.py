"""The voice frames in the gateway's AsyncAPI document cannot drift from what is sent: every
frame a device receives during voice input, a streamed session, a spoken reply and the error
rows must fit the payload documented for its type, and so must the frames the test sends."""
from __future__ import annotations

import asyncio

from tests.support.asyncapi import FrameChecker, validate_document
from tests.support.voice_gateway import (ai_core_url, b64, chat_settings, fake_voice, gateway_port,  # noqa: F401
                                         make_voice_gateway, provider, voice_gateway, ws_path)

VOICE_SERVER_FRAMES = {"voice_transcript", "voice_interim", "voice_final", "stream_segments"}


async def test_voice_frames_fit_the_document(voice_gateway, fake_voice, provider):
    document = await (await voice_gateway.get("/api/v1/asyncapi.json")).json()
    validate_document(document)
    server, client = FrameChecker(document), FrameChecker(document, "client")
    fake_voice.transcripts[b"recording"] = ("Hello.", "en")
    fake_voice.transcripts[b"stream-audio" * 50] = ("Read this aloud.", "en")
    provider.reply = "Sure. Here it is! 好的。"

    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="frames")) as ws:
        async def send(frame: dict) -> None:
            client.check(frame)
            await ws.send_json(frame)

        async def until(kind: str) -> dict:
            while True:
                frame = await asyncio.wait_for(ws.receive_json(), 10)
                server.check(frame)
                if frame["type"] == kind:
                    return frame

        await send({"type": "voice_input", "audio_data": b64(b"recording"), "mode": "voice_msg",
                    "client_msg_id": "one"})
        await until("voice_transcript")
        end = await until("stream_end")
        assert end["full_audio_url"]
        await send({"type": "voice_stream_start", "format": "pcm", "language": "en", "sample_rate": 16000})
        await until("voice_interim")
        audio = b"stream-audio" * 50
        for sequence, start in enumerate(range(0, len(audio), 100)):
            await send({"type": "voice_stream_chunk", "audio_data": b64(audio[start:start + 100]),
                        "sequence": sequence})
        await until("voice_interim")
        await send({"type": "voice_stream_end"})
        await until("voice_final")
        await until("stream_end")
        await send({"type": "voice_stream_end"})
        await until("error")
    assert VOICE_SERVER_FRAMES <= set(server.seen), set(server.seen)
