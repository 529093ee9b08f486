"""The voice service's models are read on first use and released after idle (issue 44): the status
says which are in memory, and a request after a release answers as before, only later."""
from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from gateway import idle
from gateway.app import create_app
from plugins.auth import tokens_plugin
from plugins.voice.engines.whisper import MODEL_BYTES, MODEL_SHA256, model_files_in
from plugins.voice.service import plugin as voice_plugin
from tests.voice.conftest import ALICE, ENGLISH
from tests.voice.test_service import ENGLISH_TEXT, transcribe, word_error_rate

IDLE_SECONDS = 1.0


@pytest.fixture
async def voice_service(aiohttp_client, make_config):
    """Whisper, PocketSphinx and Piper, released after one idle second."""
    config = make_config({"core.model_idle_seconds": IDLE_SECONDS,
                          "plugins.voice_engines": {"stt_engines": ["whisper", "pocketsphinx"],
                                                    "tts_engines": ["piper"]}})
    try:
        yield await aiohttp_client(create_app("voice-service", config, plugins=[tokens_plugin, voice_plugin]))
    finally:
        idle.configure(idle.DEFAULT_IDLE_SECONDS)


async def in_memory(client) -> dict[str, bool]:
    body = await (await client.get("/api/v1/status", headers=ALICE)).json()
    engines = body["stt"]["engines"] + body["tts"]["engines"]
    assert all(engine["loaded"] for engine in engines), engines   # ready, whatever is in memory
    return {engine["name"]: engine["model_loaded"] for engine in engines}


async def until_released(client, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any((await in_memory(client)).values()):
        assert time.monotonic() < deadline, await in_memory(client)
        await asyncio.sleep(0.1)


async def test_models_load_on_first_use_and_leave_after_idle(voice_service):
    await until_released(voice_service)   # whatever an earlier test of this process loaded
    first = await transcribe(voice_service, ENGLISH.read_bytes(), language="en")
    assert word_error_rate(ENGLISH_TEXT, first["text"]) <= 0.25, first["text"]
    assert (await in_memory(voice_service))["whisper"] is True
    speech = await voice_service.post("/api/v1/tts", headers=ALICE, json={"text": "The light is on."})
    assert speech.status == 200 and len(await speech.read()) > 1000
    assert (await in_memory(voice_service))["piper"] is True

    await until_released(voice_service)
    again = await transcribe(voice_service, ENGLISH.read_bytes(), language="en")
    assert again["text"] == first["text"]
    assert (await in_memory(voice_service))["pocketsphinx"] is False   # never asked for: never read


async def test_requests_during_a_release_all_answer(voice_service):
    """Requests spread over several idle periods, some while a release runs: none fails."""
    await until_released(voice_service)
    answers = []
    for pause in (0.0, IDLE_SECONDS * 1.2, 0.05, IDLE_SECONDS * 0.95, IDLE_SECONDS * 1.5):
        await asyncio.sleep(pause)
        speech, recognised = await asyncio.gather(
            voice_service.post("/api/v1/tts", headers=ALICE, json={"text": "Good night."}),
            transcribe(voice_service, ENGLISH.read_bytes(), language="en"))
        assert speech.status == 200, await speech.text()
        answers.append(recognised["text"])
    assert len(set(answers)) == 1, answers


def test_whispers_model_is_written_once_into_the_model_directory(tmp_path):
    """Read from files, CTranslate2 holds the model alone (100 MB, not 240 with in-memory files)."""
    target = model_files_in(tmp_path / "models")
    assert target is not None and (target / "model.bin").stat().st_size == MODEL_BYTES
    assert hashlib.sha256((target / "model.bin").read_bytes()).hexdigest() == MODEL_SHA256
    written = (target / "model.bin").stat().st_mtime_ns
    assert model_files_in(tmp_path / "models") == target
    assert (target / "model.bin").stat().st_mtime_ns == written
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the directory would be")
    assert model_files_in(blocked) is None   # then the in-memory files are used
