"""The gateway's voice endpoints (spec "Voice"): each passed on to the voice service with the
service credential, its failures in the spec's body, 413 past 10 MB, 502
`voice_service_unreachable` when the service is down."""
from __future__ import annotations

import io

import aiohttp

from tests.support.voice_gateway import (ADMIN, ai_core_url, chat_settings, fake_voice, gateway_port,  # noqa: F401
                                         make_voice_gateway, provider, token_for, voice_gateway)
from tests.support.voice_gateway import unreachable_url


def auth(client, identity=ADMIN) -> dict:
    return {"Authorization": f"Bearer {token_for(client, identity)}"}


def recording(audio: bytes, **fields) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("audio", io.BytesIO(audio), filename="clip.wav", content_type="audio/wav")
    for name, value in fields.items():
        form.add_field(name, value)
    return form


async def test_transcribe_passes_the_recording_and_answers_the_text(voice_gateway, fake_voice):
    fake_voice.transcripts[b"hello-audio"] = ("Hello there.", "en")
    response = await voice_gateway.post("/api/v1/voice/transcribe", data=recording(b"hello-audio", language="en"),
                                        headers=auth(voice_gateway))
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["success"] is True and body["text"] == "Hello there." and body["language"] == "en"
    assert body["engine"] == "fake" and "duration_ms" in body
    assert fake_voice.users == ["admin"]  # for the service's STT log


async def test_transcribe_failures_answer_success_false(voice_gateway):
    headers = auth(voice_gateway)
    response = await voice_gateway.post("/api/v1/voice/transcribe", data=recording(b"garbage"), headers=headers)
    assert response.status == 400
    body = await response.json()
    assert body["success"] is False and body["errorType"] == "undecodable_audio" and body["error"]
    # A language no engine knows: the service's 422, passed on.
    response = await voice_gateway.post("/api/v1/voice/transcribe", data=recording(b"x", language="xx"),
                                        headers=headers)
    assert response.status == 400 and (await response.json())["success"] is False
    # No audio field.
    form = aiohttp.FormData()
    form.add_field("language", "en")
    response = await voice_gateway.post("/api/v1/voice/transcribe", data=form, headers=headers)
    assert response.status == 400 and (await response.json())["errorType"] == "validation_error"
    # Not multipart at all.
    response = await voice_gateway.post("/api/v1/voice/transcribe", json={"audio": "x"}, headers=headers)
    assert response.status == 400 and (await response.json())["success"] is False


async def test_transcribe_refuses_more_than_ten_megabytes(voice_gateway):
    response = await voice_gateway.post("/api/v1/voice/transcribe", data=recording(b"\0" * (10 * 1024 * 1024 + 1)),
                                        headers=auth(voice_gateway))
    assert response.status == 413
    body = await response.json()
    assert body["success"] is False and body["errorType"] == "file_too_large"


async def test_endpoints_need_a_token(voice_gateway):
    for method, path in [("POST", "/api/v1/voice/transcribe"), ("POST", "/api/v1/voice/tts"),
                         ("GET", "/api/v1/voice/tts/voices"), ("GET", "/api/v1/voice/tts/status"),
                         ("GET", "/api/v1/voice/status")]:
        response = await voice_gateway.request(method, path)
        assert response.status == 401, path


async def test_tts_answers_the_audio_with_its_content_type(voice_gateway, fake_voice):
    response = await voice_gateway.post("/api/v1/voice/tts", json={"text": "Good morning.", "language": "en",
                                                                   "speed": 1.5, "voice": "en-fake"},
                                        headers=auth(voice_gateway))
    assert response.status == 200
    assert response.content_type == "audio/wav"
    assert response.headers["X-Audio-Duration-Ms"] == str(40 * len("Good morning."))
    audio = await response.read()
    assert audio.startswith(b"RIFF")
    assert fake_voice.tts_requests[-1] == {"text": "Good morning.", "language": "en", "speed": 1.5,
                                           "voice": "en-fake", "format": "wav"}


async def test_tts_bad_bodies(voice_gateway):
    headers = auth(voice_gateway)
    for body in ({}, {"text": ""}, {"text": "hi", "speed": 3}, {"text": "hi", "format": "flac"},
                 {"text": "x" * 5001}):
        response = await voice_gateway.post("/api/v1/voice/tts", json=body, headers=headers)
        assert response.status == 400, body
        assert (await response.json())["errorType"] == "validation_error"
    response = await voice_gateway.post("/api/v1/voice/tts", json={"text": "hi", "language": "ja"}, headers=headers)
    assert response.status == 422
    assert (await response.json())["errorType"] == "language_unsupported"


async def test_voices_and_statuses(voice_gateway):
    headers = auth(voice_gateway)
    voices = await (await voice_gateway.get("/api/v1/voice/tts/voices", headers=headers)).json()
    assert voices["count"] == 2 and {v["language"] for v in voices["voices"]} == {"en", "zh"}
    speech = await (await voice_gateway.get("/api/v1/voice/tts/status", headers=headers)).json()
    assert speech["ready"] is True and speech["default_voices"]["zh"] == "zh-fake"
    combined = await (await voice_gateway.get("/api/v1/voice/status", headers=headers)).json()
    assert combined["available"] is True
    assert combined["stt"]["languages"] == ["en", "zh"] and combined["stt"]["sample_rate"] == 16000
    assert combined["tts"]["voices"] == 2 and combined["tts_status"]["ready"] is True


async def test_every_endpoint_is_a_502_when_the_voice_service_is_down(make_voice_gateway):
    gateway = await make_voice_gateway(unreachable_url())
    headers = auth(gateway)
    calls = [("GET", "/api/v1/voice/status", {}), ("GET", "/api/v1/voice/tts/voices", {}),
             ("GET", "/api/v1/voice/tts/status", {}), ("POST", "/api/v1/voice/tts", {"json": {"text": "hi"}}),
             ("POST", "/api/v1/voice/transcribe", {"data": recording(b"abc")})]
    for method, path, options in calls:
        response = await gateway.request(method, path, headers=headers, **options)
        assert response.status == 502, path
        body = await response.json()
        assert body["errorType"] == "voice_service_unreachable" and "VOICE_SERVICE_URL" in body["hint"], path
        if path.endswith("transcribe"):
            assert body["success"] is False


async def test_a_refused_service_credential_is_unreachable_not_the_callers_fault(make_voice_gateway, fake_voice):
    gateway = await make_voice_gateway(fake_voice.url, overrides={"auth.service_token": "another-token"})
    response = await gateway.get("/api/v1/voice/status", headers=auth(gateway))
    assert response.status == 502
    assert "SERVICE_TOKEN" in (await response.json())["hint"]
