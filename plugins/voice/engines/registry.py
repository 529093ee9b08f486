"""The engines a voice service runs: built from the entry-point group, loaded at start, and
chosen per language (docs/voice.md, "Engines")."""
from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any, cast

from gateway.text import HAN
from . import (EngineFailed, EngineHttp, SpeechRecognizer, SpeechSynthesizer, Voice, engine_factories)
from ..settings import VoiceEngineSettings

log = logging.getLogger("voice.engines")
API_LANGUAGES = ("zh", "en", "ja", "ko")
KANA = re.compile(r"[\u3040-\u30ff]")
HANGUL = re.compile(r"[\uac00-\ud7af]")


@dataclass
class Loaded:
    engine: Any
    error: str | None = None


@dataclass
class Engines:
    settings: VoiceEngineSettings
    recognizers: list[Loaded] = field(default_factory=list)
    synthesizers: list[Loaded] = field(default_factory=list)

    @classmethod
    def build(cls, settings: VoiceEngineSettings, http: EngineHttp) -> "Engines":
        engines = cls(settings)
        factories = engine_factories()
        made: dict[str, list[Any]] = {}
        for name in dict.fromkeys(settings.stt_engines + settings.tts_engines):
            if name not in factories:
                log.warning("voice engine %s is not installed (entry-point group gateway.voice_engines)", name)
                continue
            made[name] = list(factories[name](settings, http))
        for name in settings.stt_engines:
            engines.recognizers += [Loaded(e) for e in made.get(name, []) if isinstance(e, SpeechRecognizer)]
        for name in settings.tts_engines:
            engines.synthesizers += [Loaded(e) for e in made.get(name, []) if isinstance(e, SpeechSynthesizer)]
        return engines

    async def load(self) -> None:
        """Load every engine at once; one that cannot run here is kept, unloaded, with why."""
        async def load_one(loaded: Loaded) -> None:
            try:
                await loaded.engine.load()
            except EngineFailed as error:
                loaded.error = str(error)
                # An optional engine left unconfigured is the normal case, not a warning.
                (log.info if error.error_type == "not_configured" else log.warning)(
                    "voice engine %s not loaded: %s", loaded.engine.name, error)
            except Exception as error:  # noqa: BLE001 - a broken engine must not stop the service
                loaded.error = f"{type(error).__name__}: {error}"
                log.exception("voice engine %s failed to load", loaded.engine.name)
        unique = {id(item.engine): item for item in self.recognizers + self.synthesizers}
        await asyncio.gather(*(load_one(item) for item in unique.values()))
        for item in self.recognizers + self.synthesizers:
            if item.error is None and not item.engine.loaded:
                item.error = unique[id(item.engine)].error
        log.info("voice engines loaded: recognition %s (languages %s), speech %s (languages %s)",
                 [e.name for e in self.loaded_recognizers()] or "none", self.stt_languages() or "none",
                 [i.engine.name for i in self.synthesizers if i.engine.loaded] or "none",
                 self.tts_languages() or "none")

    # ------------------------------------------------------------------ recognition

    def loaded_recognizers(self) -> list[SpeechRecognizer]:
        return [item.engine for item in self.recognizers if item.engine.loaded]

    def recognizer_for(self, language: str) -> SpeechRecognizer | None:
        """The engine that recognises `language`: the configured one, else the first loaded."""
        loaded = self.loaded_recognizers()
        chosen = self.settings.stt_language_engines.get(language)
        for engine in loaded:
            if engine.name == chosen and language in engine.languages:
                return engine
        return next((engine for engine in loaded if language in engine.languages), None)

    def stt_languages(self) -> list[str]:
        return [language for language in API_LANGUAGES if self.recognizer_for(language) is not None]

    def stt_status(self) -> dict:
        loaded = self.loaded_recognizers()
        languages = self.stt_languages()
        return {"engines": [{"name": item.engine.name, "languages": list(item.engine.languages),
                             "model": item.engine.model, "loaded": bool(item.engine.loaded),
                             "model_loaded": model_loaded(item.engine),
                             "detects_language": bool(item.engine.detects_language), "error": item.error}
                            for item in self.recognizers],
                "default_engine": loaded[0].name if loaded else None, "languages": languages,
                "unsupported_languages": [language for language in API_LANGUAGES if language not in languages],
                "language_engines": {language: engine.name for language in languages
                                     if (engine := self.recognizer_for(language)) is not None},
                "default_language": self.settings.default_language, "sample_rate": 16000}

    # ------------------------------------------------------------------ synthesis

    def voices(self) -> list[Voice]:
        seen: dict[str, Voice] = {}
        for item in self.synthesizers:
            if item.engine.loaded:
                for voice in item.engine.voices():
                    seen.setdefault(voice.id, voice)
        return list(seen.values())

    def synthesizer_of(self, voice: Voice) -> SpeechSynthesizer:
        return cast(SpeechSynthesizer, next(item.engine for item in self.synthesizers
                                            if item.engine.loaded and item.engine.name == voice.engine))

    def voice_for(self, language: str) -> Voice | None:
        voices = {voice.id: voice for voice in self.voices()}
        configured = self.settings.tts_default_voices.get(language)
        if configured in voices:
            return voices[configured]
        return next((voice for voice in voices.values() if voice.language == language),
                    next((voice for voice in voices.values() if voice.language == "*"), None))

    def tts_languages(self) -> list[str]:
        return [language for language in API_LANGUAGES if self.voice_for(language) is not None]

    def tts_status(self) -> dict:
        voices = self.voices()
        return {"engines": [{"name": item.engine.name, "loaded": bool(item.engine.loaded),
                             "model_loaded": model_loaded(item.engine),
                             "voices": len(item.engine.voices()) if item.engine.loaded else 0, "error": item.error}
                            for item in self.synthesizers],
                "voices": len(voices), "languages": self.tts_languages(),
                "default_voices": {language: voice.id for language in API_LANGUAGES
                                   if (voice := self.voice_for(language)) is not None},
                "ready": bool(voices)}


def model_loaded(engine: Any) -> bool:
    """Whether the engine's model is in memory now: engines that read one on first use and
    release it when idle say so (`model_loaded`); for the others, being loaded is all there is."""
    return bool(getattr(engine, "model_loaded", engine.loaded))


def guess_language(text: str) -> str:
    """The language of a text to speak, from its script (enough to pick a voice)."""
    if KANA.search(text):
        return "ja"
    if HANGUL.search(text):
        return "ko"
    han = len(HAN.findall(text))
    return "zh" if han and han * 4 >= len(re.sub(r"\s", "", text)) else "en"
