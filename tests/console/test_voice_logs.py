"""The STT log end to end: the console runs the real voice service as a child process (its
OpenAI-compatible engine talking to a local server that speaks that protocol), an upload is
transcribed through the console's proxy, the service logs its `voice.stt` record, and the console
turns that line of its output into an entry of `/api/voice/logs` and an `stt-log` push."""
from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from console.app import create_console_app
from console.push import STT_LOG_SIZE, PushHub, SttLog
from tests.voice.fake_speech_provider import FakeSpeechProvider

HELLO_WORLD = Path(__file__).resolve().parents[2] / "bench" / "voice" / "recordings" / "audioeval-en-hello_world.wav"


def test_the_ring_buffer_keeps_the_last_200():
    stt_log = SttLog(PushHub())
    for number in range(STT_LOG_SIZE + 5):
        stt_log.read_service_line("voice-service", f'2026-11-24 08:00:00 INFO voice.stt: {{"text": "n{number}", '
                                                   f'"processing_ms": {number}.25}}')
    entries = stt_log.entries()
    assert stt_log.size == 200 and len(entries) == 200
    assert entries[0]["text"] == "n5" and entries[-1]["text"] == "n204" and entries[-1]["processingMs"] == 204.2
    assert stt_log.read_service_line("voice-service", "INFO voice.stt: not json") is None


@pytest.mark.slow
async def test_a_transcription_through_the_console_lands_in_its_stt_log(aiohttp_client, aiohttp_server, service_table,
                                                                        make_config, tmp_path, monkeypatch):
    provider = FakeSpeechProvider()
    provider_server = await aiohttp_server(provider.app)
    settings = tmp_path / "voice.toml"
    settings.write_text(
        '[fetch]\nmodel_hosts = ["127.0.0.1"]\n\n'
        '[plugins.voice_engines]\nstt_engines = ["openai"]\ntts_engines = ["openai"]\n'
        f'openai_base_url = "{provider_server.make_url("/v1")}"\nopenai_api_key = "provider-key"\n'
        'openai_stt_model = "whisper-large"\nopenai_tts_model = "tts-hd"\nopenai_voices = ["nova"]\n'
        'tts_default_voices = {en = "openai:nova"}\n')
    monkeypatch.setenv("GATEWAY_CONFIG", str(settings))
    monkeypatch.setenv("SERVICE_TOKEN", "test-service-token")  # the console's, handed to its child
    specs = service_table([{"id": "voice-service", "name": "speech-recognition service",
                            "plugins": ["auth_tokens", "voice_engines"]}])
    client = await aiohttp_client(create_console_app(make_config({"console.stop_timeout": 5}), specs=specs))
    socket = await client.ws_connect("/ws")
    try:
        started = await client.post("/api/services/voice-service/start")
        assert started.status == 200, await started.text()
        assert (await (await client.get("/api/voice/logs")).json()) == {"entries": [], "size": 200}

        form = aiohttp.FormData()
        form.add_field("audio", HELLO_WORLD.read_bytes(), filename="hello.wav", content_type="audio/wav")
        form.add_field("language", "en")
        answer = await client.post("/api/voice/transcribe", data=form)
        assert answer.status == 200, await answer.text()
        text = (await answer.json())["text"]

        async def pushed() -> dict:
            while True:
                message = await socket.receive_json()
                if message["type"] == "stt-log":
                    return message["entry"]
        entry = await asyncio.wait_for(pushed(), 20)
        assert entry["text"] == text and entry["service"] == "voice-service" and entry["engine"].startswith("openai")
        assert entry["processingMs"] >= 0 and entry["language"] == "en"
        logs = await (await client.get("/api/voice/logs")).json()
        assert logs["entries"] == [entry]
    finally:
        await socket.close()
        await client.post("/api/services/stop-all")
