"""The engine interface: every built-in engine is found through the entry-point group a
third-party engine uses, and meets the interface."""
from __future__ import annotations

import pytest

from plugins.voice.engines import SpeechRecognizer, SpeechSynthesizer, engine_factories
from plugins.voice.engines.registry import guess_language
from plugins.voice.settings import VoiceEngineSettings

SETTINGS = VoiceEngineSettings(whisper_threads=2, recognitions_at_once=1, whisper_beam_size=1, openai_stt_model="m",
                               openai_tts_model="t", openai_languages=["en"], openai_voices=["alloy"],
                               openai_timeout=5.0)


class NoHttp:
    http = None


def test_built_in_engines_come_through_the_entry_point_group():
    factories = engine_factories()
    assert set(factories) >= {"whisper", "pocketsphinx", "piper", "espeak", "openai"}
    kinds = {name: [(isinstance(engine, SpeechRecognizer), isinstance(engine, SpeechSynthesizer))
                    for engine in factory(SETTINGS, NoHttp())] for name, factory in factories.items()}
    assert kinds["whisper"] == [(True, False)] and kinds["pocketsphinx"] == [(True, False)]
    assert kinds["piper"] == [(False, True)] and kinds["espeak"] == [(False, True)]
    assert kinds["openai"] == [(True, True)]


def test_the_language_of_a_text_to_speak():
    assert guess_language("Turn on the light") == "en"
    assert guess_language("把灯打开 please") == "zh"
    assert guess_language("こんにちは") == "ja" and guess_language("안녕하세요") == "ko"


async def test_a_third_party_engine_is_picked_for_its_language(make_voice_service):
    import aiohttp

    from tests.voice.conftest import ALICE, ENGLISH
    client = await make_voice_service(stt_engines=["whisper", "seconds_counter"], tts_engines=[],
                                      stt_language_engines={"ja": "seconds_counter"})
    status = await (await client.get("/api/v1/status", headers=ALICE)).json()
    assert status["stt"]["language_engines"]["ja"] == "seconds_counter"
    assert status["stt"]["language_engines"]["en"] == "whisper"
    form = aiohttp.FormData()
    form.add_field("audio", ENGLISH.read_bytes(), filename="a.wav")
    form.add_field("language", "ja")
    body = await (await client.post("/api/v1/transcribe", headers=ALICE, data=form)).json()
    assert body == {**body, "success": True, "text": "3.0 秒", "engine": "seconds_counter", "language": "ja"}


async def test_an_abandoned_fitted_pass_stops_before_decoding():
    """A stream's interim that is no longer wanted (stop came) gives up between Whisper's encoder
    and decoder, the two calls CTranslate2 makes, instead of holding a core until it ends."""
    import threading

    from plugins.voice.engines import PassAbandoned
    from plugins.voice.engines.whisper import WhisperRecognizer
    from tests.voice.conftest import ENGLISH, samples_of
    whisper = WhisperRecognizer(2, 1, 1)
    await whisper.load()
    abandon = threading.Event()
    abandon.set()
    with pytest.raises(PassAbandoned):
        await whisper.recognize_fitted(samples_of(ENGLISH), "en", abandon=abandon)


async def test_whispers_fitted_window_hears_what_the_full_window_hears():
    """A stream's passes encode the audio plus a margin (at least 10 s), not 30 s: the same words
    in English and Chinese, nothing in silence, and audio too long for it goes the ordinary way."""
    import numpy as np

    from plugins.voice.engines.whisper import FITTED_MAX_SECONDS, WhisperRecognizer
    from tests.voice.conftest import CHINESE, ENGLISH, character_error_rate, samples_of, word_error_rate
    whisper = WhisperRecognizer(2, 1, 1)
    await whisper.load()
    english = samples_of(ENGLISH)
    fitted = await whisper.recognize_fitted(english, "en")
    full = await whisper.recognize(english, "en")
    assert fitted.language == "en" and word_error_rate(full.text, fitted.text) <= 0.15, (fitted, full)
    chinese = await whisper.recognize_fitted(samples_of(CHINESE), "zh")
    assert chinese.language == "zh" and character_error_rate("你好世界", chinese.text) <= 0.5, chinese
    assert (await whisper.recognize_fitted(np.zeros(16000 * 2, np.float32), "en")).text == ""
    # Past the fitted limit it is the ordinary 30 s pass: five clips of one reader, 28 s in all
    # (natural speech: a clip repeated would set Whisper looping, and its random retries apart).
    from tests.voice.conftest import RECORDINGS
    clips = sorted(RECORDINGS.glob("sense_and_sensibility_*.wav"))
    assert len(clips) == 5
    long = np.concatenate([samples_of(clip) for clip in clips])
    assert len(long) / 16000 > FITTED_MAX_SECONDS
    said = " ".join(clip.with_suffix(".txt").read_text(encoding="utf-8").strip() for clip in clips)
    assert word_error_rate(said, (await whisper.recognize_fitted(long, "en")).text) <= 0.2


