"""The voice service's HTTP endpoints on real engines and real recordings: status, one-shot
transcription in every format and every failure, synthesis, voices."""
from __future__ import annotations

import io
import logging
import wave

import aiohttp
import numpy as np
import pytest

from plugins.voice import audio, audio_limits, resampling
from tests.voice.conftest import (ALICE, CHINESE, ENGLISH, SERVICE, character_error_rate, encoded, needs_espeak, pcm16,
                                  samples_of, word_error_rate)

ENGLISH_TEXT = "he was not an ill disposed young man"
CHINESE_TEXT = "你好世界"


def form(data: bytes, **fields) -> aiohttp.FormData:
    body = aiohttp.FormData()
    body.add_field("audio", data, filename="audio.bin", content_type="application/octet-stream")
    for key, value in fields.items():
        body.add_field(key, str(value))
    return body


async def transcribe(client, data: bytes, status: int = 200, headers=ALICE, **fields) -> dict:
    response = await client.post("/api/v1/transcribe", headers=headers, data=form(data, **fields))
    body = await response.json()
    assert response.status == status, body
    return body


@needs_espeak
async def test_status_lists_engines_languages_and_sample_rate(voice_service):
    response = await voice_service.get("/api/v1/status", headers=ALICE)
    assert response.status == 200
    body = await response.json()
    assert body["stt"]["sample_rate"] == 16000
    assert body["stt"]["default_engine"] == "whisper"
    whisper = body["stt"]["engines"][0]
    assert whisper["loaded"] and set(whisper["languages"]) >= {"en", "zh"} and "whisper-base" in whisper["model"]
    assert set(body["stt"]["languages"]) >= {"en", "zh"}
    assert body["tts"]["voices"] >= 2 and set(body["tts"]["languages"]) >= {"en", "zh"}


async def test_status_needs_a_credential(voice_service):
    response = await voice_service.get("/api/v1/status")
    assert response.status == 401
    assert (await response.json())["errorType"]


async def test_a_real_english_recording_is_recognised(voice_service, caplog):
    caplog.set_level(logging.INFO, logger="voice.stt")
    body = await transcribe(voice_service, ENGLISH.read_bytes(), language="en")
    assert body["success"] is True and body["language"] == "en" and body["engine"] == "whisper"
    assert word_error_rate(ENGLISH_TEXT, body["text"]) <= 0.25, body["text"]
    assert 2900 <= body["duration_ms"] <= 3100 and body["processing_ms"] > 0
    records = [record for record in caplog.records if record.name == "voice.stt"]
    assert records and '"user_id": "user_alice"' in records[-1].getMessage()
    assert '"audio_ms": 2990' in records[-1].getMessage() and '"rtf": ' in records[-1].getMessage()


async def test_a_real_chinese_recording_is_recognised(voice_service):
    body = await transcribe(voice_service, CHINESE.read_bytes(), language="zh")
    assert body["success"] is True and body["language"] == "zh"
    assert character_error_rate(CHINESE_TEXT, body["text"]) <= 0.5, body["text"]


async def test_auto_detects_english(voice_service):
    body = await transcribe(voice_service, ENGLISH.read_bytes(), language="auto")
    assert body["language"] == "en"
    assert word_error_rate(ENGLISH_TEXT, body["text"]) <= 0.25


async def test_the_service_credential_names_the_user(voice_service, caplog):
    caplog.set_level(logging.INFO, logger="voice.stt")
    await transcribe(voice_service, ENGLISH.read_bytes(), headers=SERVICE, language="en", user_id="user_bob")
    assert '"user_id": "user_bob"' in [r for r in caplog.records if r.name == "voice.stt"][-1].getMessage()


@pytest.mark.parametrize("container,codec,rate,hint", [
    ("wav", "pcm_s16le", 16000, None), ("mp3", "libmp3lame", 16000, None), ("ogg", "libopus", 48000, "opus"),
    ("flac", "flac", 16000, None), ("webm", "libopus", 48000, "webm"), ("wav", "pcm_s16le", 44100, "wav")])
def test_every_format_decodes_to_16k_mono(container, codec, rate, hint):
    original = samples_of(ENGLISH)
    decoded = audio.decode(encoded(original, container, codec, rate), hint)
    assert abs(len(decoded) - len(original)) < 0.05 * audio_limits.SAMPLE_RATE
    assert decoded.dtype == np.float32
    # The same speech came back (lossy codecs shift it a little).
    length = min(len(decoded), len(original))
    assert np.corrcoef(decoded[:length], original[:length])[0, 1] > 0.5 or codec != "pcm_s16le"


def test_pcm_is_s16le_16k_unless_a_rate_is_named():
    original = samples_of(ENGLISH)
    assert len(audio.decode(pcm16(original), "pcm")) == len(original)
    at_8k = resampling.resample(original, 16000, 8000)
    assert abs(len(audio.decode(pcm16(at_8k), "pcm", 8000)) - len(original)) < 200


async def test_pcm_upload_with_its_sample_rate(voice_service):
    at_8k = resampling.resample(samples_of(ENGLISH), 16000, 8000)
    body = await transcribe(voice_service, pcm16(at_8k), language="en", format="pcm", sample_rate=8000)
    assert word_error_rate(ENGLISH_TEXT, body["text"]) <= 0.35


async def test_garbage_is_a_clear_400(voice_service):
    body = await transcribe(voice_service, b"this is not audio at all" * 50, status=400, language="en")
    assert body["success"] is False and body["errorType"] == "audio_undecodable" and body["error"]


async def test_empty_audio_is_a_clear_400(voice_service):
    body = await transcribe(voice_service, b"", status=400, language="en")
    assert body["success"] is False and body["errorType"] == "audio_empty"


async def test_silence_is_no_speech(voice_service):
    silence = encoded(np.zeros(audio_limits.SAMPLE_RATE * 2, np.float32), "wav", "pcm_s16le")
    body = await transcribe(voice_service, silence, status=422, language="en")
    assert body["success"] is False and body["errorType"] == "no_speech"


async def test_over_size_audio_is_413(make_voice_service):
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], max_audio_bytes=50_000)
    body = await transcribe(client, ENGLISH.read_bytes(), status=413, language="en")
    assert body["success"] is False and body["errorType"] == "audio_too_large"


async def test_over_long_audio_is_413(make_voice_service):
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], max_audio_seconds=1.0)
    body = await transcribe(client, ENGLISH.read_bytes(), status=413, language="en")
    assert body["errorType"] == "audio_too_long"


async def test_missing_audio_field_and_wrong_body(voice_service):
    response = await voice_service.post("/api/v1/transcribe", headers=ALICE, data={"language": "en"})
    body = await response.json()
    assert response.status == 400 and body["success"] is False and body["errorType"] == "validation_error"
    response = await voice_service.post("/api/v1/transcribe", headers=ALICE, json={"audio": "x"})
    assert response.status == 400 and (await response.json())["success"] is False


async def test_an_unknown_language_value_is_400(voice_service):
    body = await transcribe(voice_service, ENGLISH.read_bytes(), status=400, language="xx")
    assert body["errorType"] == "validation_error" and body["success"] is False and "language" in body["error"] + str(body.get("fields"))


async def test_a_language_no_engine_recognises_is_422_naming_it(make_voice_service):
    client = await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[])
    body = await transcribe(client, CHINESE.read_bytes(), status=422, language="zh")
    assert body["success"] is False and body["errorType"] == "language_unsupported"
    assert "zh" in body["error"] and body["language"] == "zh"
    status = await (await client.get("/api/v1/status", headers=ALICE)).json()
    assert "zh" in status["stt"]["unsupported_languages"] and status["stt"]["languages"] == ["en"]


async def test_no_engine_at_all_says_so(make_voice_service):
    client = await make_voice_service(stt_engines=[], tts_engines=[])
    body = await transcribe(client, ENGLISH.read_bytes(), status=422, language="auto")
    assert body["errorType"] == "language_unsupported"
    tts = await (await client.get("/api/v1/tts/status", headers=ALICE)).json()
    assert tts["ready"] is False and tts["voices"] == 0


# ------------------------------------------------------------------ synthesis

def wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as reader:
        return reader.getnframes() / reader.getframerate()


async def test_tts_speaks_english_as_wav(voice_service):
    response = await voice_service.post("/api/v1/tts", headers=ALICE, json={"text": "Hello, this is your assistant."})
    assert response.status == 200 and response.content_type == "audio/wav"
    data = await response.read()
    assert response.headers["X-Voice"] == "piper:en_US-joe-medium"
    assert abs(wav_seconds(data) * 1000 - int(response.headers["X-Audio-Duration-Ms"])) < 50
    assert wav_seconds(data) > 1.0


async def test_tts_speech_is_recognised_back(voice_service):
    response = await voice_service.post("/api/v1/tts", headers=ALICE,
                                        json={"text": "Turn on the kitchen light.", "format": "mp3"})
    assert response.status == 200 and response.content_type == "audio/mpeg"
    body = await transcribe(voice_service, await response.read(), language="en")
    assert word_error_rate("turn on the kitchen light", body["text"]) <= 0.4, body["text"]


@needs_espeak
async def test_tts_speaks_chinese_as_ogg(voice_service):
    response = await voice_service.post("/api/v1/tts", headers=ALICE, json={"text": "你好，今天天气很好。", "format": "ogg"})
    assert response.status == 200 and response.content_type == "audio/ogg"
    assert response.headers["X-Voice"] == "espeak:cmn-latn-pinyin"
    assert len(audio.decode(await response.read())) > audio_limits.SAMPLE_RATE   # more than a second of speech


async def test_tts_speed_changes_the_length(voice_service):
    async def seconds(speed: float) -> float:
        response = await voice_service.post("/api/v1/tts", headers=ALICE, json={"text": "One two three four five.",
                                                                                 "speed": speed})
        return wav_seconds(await response.read())
    assert await seconds(2.0) < await seconds(1.0) * 0.75


async def test_tts_markup_only_and_errors(voice_service):
    cases = [({"text": "```\nprint(1)\n```"}, 400, "nothing_to_say"), ({"text": ""}, 400, "validation_error"),
             ({"text": "hi", "voice": "nobody"}, 400, "unknown_voice"), ({"text": "hi", "speed": 3}, 400,
                                                                          "validation_error"),
             ({"text": "hi", "format": "aiff"}, 400, "validation_error")]
    for body, status, error_type in cases:
        response = await voice_service.post("/api/v1/tts", headers=ALICE, json=body)
        answer = await response.json()
        assert response.status == status and answer["errorType"] == error_type, (body, answer)


async def test_tts_text_too_long(make_voice_service):
    client = await make_voice_service(stt_engines=[], tts_engines=["piper"], max_tts_chars=10)
    response = await client.post("/api/v1/tts", headers=ALICE, json={"text": "far more than ten characters"})
    assert response.status == 400 and (await response.json())["errorType"] == "text_too_long"


async def test_tts_language_nobody_speaks_is_422(make_voice_service):
    client = await make_voice_service(stt_engines=[], tts_engines=["piper"])
    response = await client.post("/api/v1/tts", headers=ALICE, json={"text": "你好", "language": "zh"})
    body = await response.json()
    assert response.status == 422 and body["errorType"] == "language_unsupported" and "zh" in body["error"]


@needs_espeak
async def test_voices_and_tts_status(voice_service):
    voices = await (await voice_service.get("/api/v1/tts/voices", headers=ALICE)).json()
    assert voices["count"] == len(voices["voices"]) >= 2
    assert {"id", "name", "language", "engine", "sample_rate"} <= set(voices["voices"][0])
    status = await (await voice_service.get("/api/v1/tts/status", headers=ALICE)).json()
    assert status["ready"] is True
    assert status["default_voices"]["en"] == "piper:en_US-joe-medium"
    assert status["default_voices"]["zh"] == "espeak:cmn-latn-pinyin"


def test_markup_is_not_read_aloud():
    from plugins.voice.synthesis import speakable
    assert speakable("**Bold** and `code` with [a link](http://x.y) ## no") == "Bold and code with a link no"
    assert speakable("Here:\n```python\nprint(1)\n```\nDone.") == "Here: Done."


async def test_without_espeak_ng_the_status_says_so_and_mandarin_speech_is_422(make_voice_service, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")   # the Debian package not installed
    client = await make_voice_service(stt_engines=[], tts_engines=["piper", "espeak"])
    status = await (await client.get("/api/v1/tts/status", headers=ALICE)).json()
    espeak = next(engine for engine in status["engines"] if engine["name"] == "espeak")
    assert espeak["loaded"] is False and "espeak-ng" in espeak["error"]
    assert "zh" not in status["languages"] and status["ready"] is True
    response = await client.post("/api/v1/tts", headers=ALICE, json={"text": "你好"})
    assert response.status == 422 and (await response.json())["errorType"] == "language_unsupported"


async def test_noise_is_no_speech_not_invented_text(voice_service):
    noise = (0.1 * np.random.default_rng(7).standard_normal(audio_limits.SAMPLE_RATE * 2)).astype(np.float32)
    for language in ("en", "zh"):
        body = await transcribe(voice_service, encoded(noise, "wav", "pcm_s16le"), status=422, language=language)
        assert body["errorType"] == "no_speech"


async def test_an_oversized_form_field_is_refused_without_reading_it_all(voice_service):
    body = await transcribe(voice_service, ENGLISH.read_bytes(), status=400, language="en" * 100_000)
    assert body["success"] is False and body["errorType"] == "validation_error" and "language" in body["error"]
