"""The OpenAI-compatible engine against a local server speaking that wire protocol."""
from __future__ import annotations

import io
import wave

import aiohttp
import pytest

from tests.voice.conftest import ALICE, ENGLISH
from tests.voice.fake_speech_provider import FakeSpeechProvider


@pytest.fixture
async def provider(aiohttp_server):
    fake = FakeSpeechProvider()
    server = await aiohttp_server(fake.app)
    fake.base_url = str(server.make_url("/v1"))  # type: ignore[attr-defined]
    return fake


@pytest.fixture
async def provider_service(make_voice_service, provider):
    return await make_voice_service(stt_engines=["openai"], tts_engines=["openai"],
                                    openai_base_url=provider.base_url, openai_api_key="provider-key",
                                    openai_stt_model="whisper-large", openai_tts_model="tts-hd",
                                    openai_voices=["nova", "alloy"], tts_default_voices={"en": "openai:nova"})


def upload(data: bytes, **fields) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("audio", data, filename="a.wav")
    for key, value in fields.items():
        form.add_field(key, value)
    return form


async def test_transcription_goes_to_the_provider_as_16k_wav(provider_service, provider):
    response = await provider_service.post("/api/v1/transcribe", headers=ALICE, data=upload(ENGLISH.read_bytes(),
                                                                                          language="en"))
    body = await response.json()
    assert response.status == 200, body
    assert body == {**body, "success": True, "text": "heard 3.0 seconds", "language": "en", "engine": "openai"}
    sent = provider.requests[-1]
    assert sent["rate"] == 16000 and sent["fields"] == {"model": "whisper-large", "language": "en",
                                                        "response_format": "verbose_json"}


async def test_auto_takes_the_providers_language(provider_service, provider):
    response = await provider_service.post("/api/v1/transcribe", headers=ALICE, data=upload(ENGLISH.read_bytes()))
    assert (await response.json())["language"] == "en"
    assert "language" not in provider.requests[-1]["fields"]


async def test_a_failing_provider_is_a_clear_502(provider_service, provider):
    provider.failing = True
    response = await provider_service.post("/api/v1/transcribe", headers=ALICE,
                                           data=upload(ENGLISH.read_bytes(), language="en"))
    body = await response.json()
    assert response.status == 502 and body["success"] is False and "500" in body["error"]


async def test_a_wrong_key_is_a_clear_502(make_voice_service, provider):
    client = await make_voice_service(stt_engines=["openai"], tts_engines=[], openai_base_url=provider.base_url,
                                      openai_api_key="wrong")
    response = await client.post("/api/v1/transcribe", headers=ALICE, data=upload(ENGLISH.read_bytes(),
                                                                                  language="en"))
    assert response.status == 502 and "401" in (await response.json())["error"]


async def test_an_unreachable_provider_is_a_clear_502(make_voice_service):
    client = await make_voice_service(stt_engines=["openai"], tts_engines=[],
                                      openai_base_url="http://127.0.0.1:9/v1", openai_timeout=2)
    response = await client.post("/api/v1/transcribe", headers=ALICE, data=upload(ENGLISH.read_bytes(),
                                                                                  language="en"))
    body = await response.json()
    assert response.status == 502 and body["errorType"] == "engine_failed"


async def test_speech_comes_from_the_provider(provider_service, provider):
    response = await provider_service.post("/api/v1/tts", headers=ALICE,
                                           json={"text": "Hello there", "speed": 1.5, "voice": "openai:alloy"})
    assert response.status == 200 and response.headers["X-Voice"] == "openai:alloy"
    with wave.open(io.BytesIO(await response.read())) as reader:
        assert reader.getframerate() == 24000
    assert provider.requests[-1]["body"] == {"model": "tts-hd", "input": "Hello there", "voice": "alloy",
                                             "response_format": "wav", "speed": 1.5}
    voices = await (await provider_service.get("/api/v1/tts/voices", headers=ALICE)).json()
    assert [voice["id"] for voice in voices["voices"]] == ["openai:nova", "openai:alloy"]
    status = await (await provider_service.get("/api/v1/tts/status", headers=ALICE)).json()
    assert status["default_voices"]["en"] == "openai:nova" and status["default_voices"]["zh"] == "openai:nova"


async def test_provider_status(provider_service):
    status = await (await provider_service.get("/api/v1/status", headers=ALICE)).json()
    engine = status["stt"]["engines"][0]
    assert engine["name"] == "openai" and engine["loaded"] and "whisper-large" in engine["model"]
