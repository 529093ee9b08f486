"""The voice service's recognition core: the engines, the recognition gate, and recognising a
recording with its STT log record (one-shot and streamed recognition share it)."""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from gateway.errors import ApiError
from gateway.identity import Identity

from . import audio
from .engines import EngineFailed, Recognition, SpeechRecognizer
from .engines.registry import Engines
from .stt_log import record_recognition
from .settings import VoiceEngineSettings

# Languages written without spaces between words (segments' texts are joined without one).
UNSPACED = ("zh", "ja")


@dataclass
class VoiceService:
    engines: Engines
    settings: VoiceEngineSettings
    gate: asyncio.Semaphore
    # The streams open now: each holds a decoder thread until it is released.
    streams: set = field(default_factory=set)

    async def run(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)

    def recognizer(self, language: str) -> tuple[SpeechRecognizer, str | None]:
        """The engine for a requested language and the language to hand it (None: detect)."""
        if language == "auto":
            default = self.engines.loaded_recognizers()
            if default and default[0].detects_language:
                return default[0], None
            language = self.settings.default_language
        engine = self.engines.recognizer_for(language)
        if engine is None:
            raise unsupported(language)
        return engine, language

    async def recognize(self, samples: np.ndarray, language: str, *, user_id: str, source: str,
                        started: float, known: Recognition | None = None, committed: tuple[str, ...] = (),
                        tail_from: int = 0) -> dict:
        """Recognise (or take `known`, a stream's interim that already covers this audio), and
        write the STT log record. A stream's audio goes to the engine's fitted-window pass when it
        has one (`recognize_with`). A stream's `committed` segments already hold the text of the
        audio before `tail_from`: only the rest is recognised (the last segment's text its context),
        and the texts joined.
        `recognised_ms` in the answer: how much audio this call recognised (0: none)."""
        engine, asked = self.recognizer(language)
        if asked is None and len(samples) < self.settings.detect_min_seconds * audio.SAMPLE_RATE:
            engine, asked = self.recognizer(self.settings.default_language)
        duration_ms = int(len(samples) * 1000 / audio.SAMPLE_RATE)
        tail = samples[tail_from:]
        recognised_ms = 0
        if known is not None:
            text, recognised = known.text, known.language
        elif await self.run(audio.is_silent, tail):
            text, recognised = "", asked or self.settings.default_language
        else:
            recognised_ms = int(len(tail) * 1000 / audio.SAMPLE_RATE)
            async with self.gate:
                try:
                    result = await recognize_with(engine, tail, asked, fitted=source == "stream",
                                                  context=committed[-1] if committed else "")
                except EngineFailed as error:
                    record_recognition(user_id=user_id, language=asked or "auto", audio_ms=duration_ms,
                                       engine=engine.name, processing_ms=(time.perf_counter() - started) * 1000,
                                       text="", source=source, success=False, error_type=error.error_type)
                    raise failure(f"The {engine.name} engine failed: {error}", error.error_type,
                                  "Try again; operators: see the voice service's log.", error.status) from None
            text, recognised = result.text, result.language or asked or ""
        if known is None and committed:
            text = joined(*committed, text, language=recognised)
        processing_ms = (time.perf_counter() - started) * 1000
        record_recognition(user_id=user_id, language=recognised, audio_ms=duration_ms, engine=engine.name,
                           processing_ms=processing_ms, text=text, source=source)
        return {"text": text, "language": recognised, "duration_ms": duration_ms, "engine": engine.name,
                "processing_ms": round(processing_ms, 1), "recognised_ms": recognised_ms}


SERVICE = web.AppKey("voice.service", VoiceService)


async def recognize_with(engine: SpeechRecognizer, samples: np.ndarray, language: str | None, *,
                         fitted: bool, abandon: threading.Event | None = None,
                         context: str = "") -> Recognition:
    """`fitted`: a stream's short utterance, recognised by the engine's `recognize_fitted` when it
    has one (Whisper: an encoder window fitted to the audio instead of 30 s) and the language is
    known; an engine without it (an optional capability, not part of the interface) recognises as
    usual. `abandon` (an interim: give up once it is not wanted) and `context` (the stream's kept text before this audio) go to `recognize_fitted`
    only."""
    quick = getattr(engine, "recognize_fitted", None) if fitted and language is not None else None
    if quick is not None:
        result: Recognition = await quick(samples, language, abandon=abandon, context=context)
        return result
    return await engine.recognize(samples, language)


def joined(*texts: str, language: str) -> str:
    """Segments' texts as one: with spaces, or none in a language written without them."""
    return ("" if language in UNSPACED else " ").join(text.strip() for text in texts if text.strip())


def failure(message: str, error_type: str, hint: str, status: int = 400, **extra: Any) -> ApiError:
    """The transcription failure body: the error body with `success: false`."""
    return ApiError(message, error_type=error_type, hint=hint, status=status, extra={"success": False, **extra})


def unsupported(language: str) -> ApiError:
    return failure(f"No speech engine of this service recognises the language {language!r}.",
                   "language_unsupported", "GET /api/v1/status lists the languages recognised; operators can "
                   "add an engine (docs/voice.md).", status=422, language=language)


def caller(identity: Identity, requested: str | None) -> str:
    """Whom a recognition is for, as the STT log records it: the person, or whom a service names."""
    if requested and (identity.kind == "service" or identity.is_admin):
        return requested
    return identity.user_id
