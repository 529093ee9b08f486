"""The voice service (`voice-service`, plugin `voice_engines`): speech to text, one-shot and
streamed, and text to speech, offline by default (docs/voice.md, "The voice service")."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import numpy as np
from aiohttp import BodyPartReader, WSMsgType, web

from gateway.context import Context
from gateway.errors import ApiError, BadRequest
from gateway.identity import Identity, require_user
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar
from gateway.validation import load, parse_body

from . import audio
from .engines import EngineFailed, PassAbandoned, Recognition, SpeechRecognizer
from .engines.registry import Engines, guess_language
from .schemas import StreamQuery, TranscribeForm, Transcription, TtsRequest, TtsStatus, VoiceList, VoiceStatus
from .settings import VoiceEngineSettings
from .stt_log import record_recognition

log = logging.getLogger("voice.service")
routes = web.RouteTableDef()
# Interim text is recognised on at most this much of the latest audio (Whisper's own window).
INTERIM_WINDOW_SECONDS = 30
# A stream's segment (recognised once and kept) holds at least this much audio before its pause:
# shorter pieces would lose the context Whisper recognises words by.
SEGMENT_MIN_SECONDS = 2.0
# Languages written without spaces between words (segments' texts are joined without one).
UNSPACED = ("zh", "ja")
POLL_SECONDS = 0.2


@dataclass
class VoiceService:
    engines: Engines
    settings: dict
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
            language = self.settings["default_language"]
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
        if asked is None and len(samples) < self.settings["detect_min_seconds"] * audio.SAMPLE_RATE:
            engine, asked = self.recognizer(self.settings["default_language"])
        duration_ms = int(len(samples) * 1000 / audio.SAMPLE_RATE)
        tail = samples[tail_from:]
        recognised_ms = 0
        if known is not None:
            text, recognised = known.text, known.language
        elif await self.run(audio.is_silent, tail):
            text, recognised = "", asked or self.settings["default_language"]
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


def segment_end(samples: np.ndarray, start: int) -> int | None:
    """Where the stream's next segment ends: the middle of the last pause after at least
    SEGMENT_MIN_SECONDS of audio past `start` with speech after it; None while there is none."""
    pause = audio.last_pause(samples[start:], not_before=int(SEGMENT_MIN_SECONDS * audio.SAMPLE_RATE))
    return None if pause is None else start + pause


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


# ------------------------------------------------------------------ status

@routes.get("/api/v1/status", name="voice.status")
@api_doc("Which engines recognise and speak which languages, their models, and the sample rate",
         responses={200: VoiceStatus})
async def status(request: web.Request) -> web.Response:
    await require_user(request)
    engines = request.config_dict[SERVICE].engines
    return web.json_response({"stt": engines.stt_status(), "tts": engines.tts_status()})


# ------------------------------------------------------------------ one-shot transcription

@routes.post("/api/v1/transcribe", name="voice.transcribe")
@api_doc("Transcribe a recording (multipart `audio`; WAV, MP3, OGG/Opus, FLAC, WebM or raw pcm)",
         body=TranscribeForm, content_type="multipart/form-data", responses={200: Transcription},
         errors=(400, 413, 422, 502, 503),
         description="Failures carry `success: false` with the error body: 400 `audio_empty`, "
                     "`audio_undecodable`, `sample_rate_unsupported` (outside 4000-192000 Hz); 413 "
                     "`audio_too_large` / `audio_too_long`; 422 `no_speech` (silence) and `language_unsupported` "
                     "(naming the language); 502/503 an engine failing.")
async def transcribe(request: web.Request) -> web.Response:
    identity = await require_user(request)
    service = request.config_dict[SERVICE]
    if not request.content_type.startswith("multipart/"):
        raise failure("Send the audio as multipart/form-data in the field `audio`.", "validation_error",
                      "Field `audio` (file), optional `language`, `format`, `sample_rate`.")
    started = time.perf_counter()
    fields: dict[str, Any] = {}
    limit = service.settings["max_audio_bytes"]
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or part.name is None:
                await part.release()
                continue
            if part.name == "audio":
                fields["audio"] = await read_limited(part, limit)
            elif part.name in ("language", "format", "sample_rate", "user_id"):
                value = await read_limited(part, 256, what=f"The field `{part.name}`", status=400,
                                           error_type="validation_error")
                fields[part.name] = value.decode("utf-8", "replace").strip()
            else:
                await part.release()
    except (ValueError, AssertionError) as error:
        raise failure(f"The multipart body cannot be read: {error}", "validation_error",
                      "Send multipart/form-data with the field `audio`.") from None
    if "audio" not in fields:
        raise failure("The multipart body has no field `audio`.", "validation_error", "Name the file field `audio`.")
    data = fields.pop("audio")
    try:
        form = load(TranscribeForm(partial=("audio",)), {key: value for key, value in fields.items() if value}, "form")
    except ApiError as error:
        error.extra["success"] = False
        raise
    language = form.get("language", "auto")
    service.recognizer(language)   # 422 before decoding when nothing recognises the language
    try:
        samples = await service.run(audio.decode, data, form.get("format"), form.get("sample_rate"),
                                    service.settings["max_audio_seconds"])
    except audio.AudioError as error:
        raise failure(error.message, error.error_type, error.hint, error.status) from None
    result = await service.recognize(samples, language, user_id=caller(identity, form.get("user_id")),
                                     source="upload", started=started)
    del result["recognised_ms"]
    if not result["text"]:
        raise failure("No speech was recognised in the audio.", "no_speech",
                      "Speak closer to the microphone, or check that the recording has sound.", 422,
                      language=result["language"])
    return web.json_response({"success": True, **result})


async def read_limited(part: BodyPartReader, limit: int, *, what: str = "The audio", status: int = 413,
                       error_type: str = "audio_too_large") -> bytes:
    """A multipart part, refused as soon as it passes `limit` (never read whole first)."""
    data = bytearray()
    while chunk := await part.read_chunk(64 * 1024):
        data.extend(chunk)
        if len(data) > limit:
            raise failure(f"{what} is larger than {limit} bytes.", error_type,
                          "Send a shorter recording, or compress it (Opus, MP3)." if status == 413
                          else "Send the form fields as short text.", status)
    return bytes(data)


# ------------------------------------------------------------------ streaming recognition

@routes.get("/api/v1/transcribe/stream", name="voice.transcribe_stream")
@api_doc("Streaming recognition (WebSocket upgrade): binary audio frames in, interim and final text out",
         query=StreamQuery, responses={101: None}, headers={"Upgrade": "`websocket`"}, errors=(400,),
         description="After `ready`, send binary frames of the announced format, then the text frame "
                     "`{\"type\": \"stop\"}`; the service sends `interim` frames while audio arrives and one "
                     "`final`, then closes. Errors: `{\"type\": \"error\", \"error\", \"errorType\"}`, then close "
                     "(docs/voice.md, \"Streaming\").")
async def transcribe_stream(request: web.Request) -> web.WebSocketResponse:
    identity = await require_user(request)
    service = request.config_dict[SERVICE]
    # A frame as large as the whole allowance passes the socket, so that one too big meets the
    # stream's own limit and its clear error rather than a bare close.
    socket = web.WebSocketResponse(heartbeat=30.0, max_msg_size=service.settings["max_audio_bytes"] + 1)
    if not socket.can_prepare(request).ok:
        raise BadRequest("This endpoint is a WebSocket: send an upgrade request.", error_type="websocket_required",
                         hint="Connect with a WebSocket client.")
    await socket.prepare(request)
    stream = AudioStream(service, socket, user_id=caller(identity, request.query.get("user_id")))
    service.streams.add(stream)
    try:
        await stream.serve(dict(request.query))
    finally:
        await stream.release()
    return socket


class StreamError(Exception):
    def __init__(self, message: str, error_type: str):
        super().__init__(message)
        self.message, self.error_type = message, error_type


class AudioStream:
    """One client's stream: its decoder, its interim recognitions, its limits. `release` frees
    everything whichever way the stream ends (stop, error, a client gone)."""

    def __init__(self, service: VoiceService, socket: web.WebSocketResponse, *, user_id: str):
        self.service, self.socket, self.user_id = service, socket, user_id
        self.settings = service.settings
        self.decoder: audio.StreamDecoder | None = None
        self.interim_task: asyncio.Task | None = None
        self.received = 0
        self.interim_at = 0          # samples decoded when the last interim recognition started
        self.running_until: int | None = None   # the end of the audio the running pass recognises
        self.last_interim = ""
        # The last interim recognised on the whole stream so far: (samples it covered, result
        # with the whole text so far).
        self.covered: tuple[int, Recognition] | None = None
        # Segments: the audio before `committed_at` ended in a pause and was recognised once;
        # its texts are kept, and later passes (the final too) recognise only what follows.
        self.committed: list[str] = []
        self.committed_at = 0
        self.detected: str | None = None   # the language an interim detected (language=auto)
        self.stopping = False              # stop came: no new interim pass starts
        # Set when the running interim's result is no longer wanted: it stops before decoding.
        self.abandon = threading.Event()

    async def serve(self, query: dict) -> None:
        try:
            parameters = load(StreamQuery(), query, "query")
        except ApiError as error:
            await self.fail(error.error, "validation_error")
            return
        language = parameters["language"]
        try:
            engine, asked = self.service.recognizer(language)
        except ApiError as error:
            await self.fail(error.error, error.error_type or "language_unsupported")
            return
        try:
            self.decoder = audio.StreamDecoder(parameters["format"], parameters.get("sample_rate"),
                                               self.settings["max_audio_seconds"])
        except audio.AudioError as error:
            await self.fail(error.message, error.error_type)
            return
        await self.socket.send_json({"type": "ready", "language": language, "format": parameters["format"],
                                     "engine": engine.name, "sample_rate": audio.SAMPLE_RATE})
        try:
            if await self.receive_until_stop(language):
                await self.finish(language)
        except StreamError as error:
            await self.fail(error.message, error.error_type)
        except audio.AudioError as error:
            await self.fail(error.message, error.error_type)
        except ApiError as error:
            await self.fail(error.error, error.error_type or "recognition_failed")

    async def receive_until_stop(self, language: str) -> bool:
        """Feed chunks until `stop` (True) or the client leaves (False)."""
        assert self.decoder is not None
        idle = self.settings["stream_idle_seconds"]
        last_frame = time.monotonic()
        while True:
            # Woken every POLL_SECONDS too: a WebM decoder thread may finish decoding chunks after
            # the last one arrived, and that audio is due its interim as well.
            try:
                message = await self.socket.receive(timeout=min(POLL_SECONDS, idle))
            except asyncio.TimeoutError:
                if self.decoder.error is not None:   # the decoding thread gave up or met a limit
                    raise self.decoder.error from None
                if time.monotonic() - last_frame >= idle:
                    raise StreamError(f"No audio for {idle:g} seconds: the stream is closed.",
                                      "stream_timeout") from None
                self.maybe_interim(language)
                continue
            last_frame = time.monotonic()
            if message.type == WSMsgType.BINARY:
                self.received += len(message.data)
                if self.received > self.settings["max_audio_bytes"]:
                    raise StreamError(f"The stream sent more than {self.settings['max_audio_bytes']} bytes.",
                                      "audio_too_large")
                # Converting and resampling a chunk is CPU work (up to max_audio_bytes of it).
                await self.service.run(self.decoder.feed, message.data)
                if self.decoder.error is not None:
                    raise self.decoder.error
                if self.decoder.sample_count > self.settings["max_audio_seconds"] * audio.SAMPLE_RATE:
                    raise StreamError(f"The stream is longer than {self.settings['max_audio_seconds']:g} seconds.",
                                      "audio_too_long")
                self.maybe_interim(language)
            elif message.type == WSMsgType.TEXT:
                try:
                    frame = json.loads(message.data)
                except ValueError:
                    frame = None
                if isinstance(frame, dict) and frame.get("type") == "stop":
                    return True
                await self.socket.send_json({"type": "error", "error": "Expected binary audio frames or "
                                             "{\"type\": \"stop\"}.", "errorType": "invalid_message"})
            else:   # CLOSE, CLOSING, CLOSED, ERROR: the client is gone
                return False

    def maybe_interim(self, language: str) -> None:
        """Passes run back to back: the next starts as soon as the last has finished and at least
        `interim_interval_seconds` of new audio came, so that at stop the newest pass covers all
        but the last moments (docs/voice.md, "Streaming")."""
        assert self.decoder is not None
        interval = int(self.settings["interim_interval_seconds"] * audio.SAMPLE_RATE)
        if (self.interim_task is None and not self.stopping
                and self.decoder.sample_count - self.interim_at >= interval and not self.only_silence_since_covered()):
            self.interim_at = self.decoder.sample_count
            self.running_until = None
            self.interim_task = asyncio.ensure_future(self.interim(language))

    def only_silence_since_covered(self) -> bool:
        """The last finished pass recognised up to the last pass's start, and only silence came
        since: another pass could not change the text, and would only hold the CPU the final, or
        the reply's speech, may need. (An RMS over the audio since that start: microseconds.)"""
        assert self.decoder is not None
        if self.covered is None or self.covered[0] != self.interim_at:
            return False
        return audio.is_silent(self.decoder.samples_since(self.interim_at))

    async def interim(self, language: str) -> None:
        assert self.decoder is not None
        try:
            whole = await self.service.run(self.decoder.samples)
            start = self.committed_at
            # With `stream_segments`, after a pause, once the language is settled, the audio up to
            # the pause is a segment: this pass recognises it, and its text is kept (docs/voice.md,
            # "Segments").
            settled = language != "auto" or self.detected is not None
            segments = self.settings["stream_segments"] and settled
            cut = await self.service.run(segment_end, whole, start) if segments else None
            end = len(whole) if cut is None else cut
            samples = whole[max(start, end - INTERIM_WINDOW_SECONDS * audio.SAMPLE_RATE):end]
            self.running_until = end
            if await self.service.run(audio.is_silent, samples):
                return
            # language=auto: the first interim long enough to tell detects the language, and the
            # rest of the stream (interims and final) keeps it; shorter ones use the default.
            engine, asked = self.service.recognizer(self.detected or language)
            if asked is None and len(samples) < self.settings["detect_min_seconds"] * audio.SAMPLE_RATE:
                engine, asked = self.service.recognizer(self.settings["default_language"])
            async with self.service.gate:
                result = await recognize_with(engine, samples, asked, fitted=True, abandon=self.abandon,
                                              context=self.committed[-1] if self.committed else "")
            if asked is None and result.language in engine.languages:
                self.detected = result.language
            whole_text = joined(*self.committed, result.text, language=result.language or asked or "")
            whole_window = end - len(samples) == start
            if whole_window and (language != "auto" or asked is None or self.detected == asked):
                self.covered = (end, Recognition(text=whole_text, language=result.language))
                if cut is not None:
                    self.committed.append(result.text)
                    self.committed_at = cut
            # A segment's pass may end before the audio the last interim showed: not sent when
            # it would take words back.
            behind = cut is not None and self.last_interim.startswith(whole_text)
            if whole_text and whole_text != self.last_interim and not behind and not self.socket.closed:
                self.last_interim = whole_text
                await self.socket.send_json({"type": "interim", "text": whole_text})
        except PassAbandoned:
            return
        except (EngineFailed, ApiError, ConnectionError) as error:
            log.info("interim recognition skipped: %s", error)
        finally:
            self.interim_task = None
        if not self.socket.closed:
            self.maybe_interim(language)   # audio came while this pass ran: the next one starts now

    async def finish(self, language: str) -> None:
        assert self.decoder is not None
        started = time.perf_counter()
        self.stopping = True
        samples = await self.service.run(self.decoder.finish)
        # Speech usually ends before stop. When only silence came after the audio the last
        # finished pass covered, its text is the final one at once; else when only silence came
        # after the audio of the pass running now, that pass is awaited; else one more pass (on a
        # window fitted to the audio) recognises it all (bench/README.md, "final after stop").
        task = self.interim_task
        covered = await self.covered_to_the_end(samples)
        if covered and task is not None:
            self.drop_interim()
        elif task is not None and await self.service.run(audio.is_silent, samples[self.running_from():]):
            await asyncio.wait([task], timeout=self.settings["max_audio_seconds"])
            covered = await self.covered_to_the_end(samples)
        elif task is not None:
            self.drop_interim()
        known = self.covered[1] if covered and self.covered is not None else None
        result = await self.service.recognize(samples, self.detected or language, user_id=self.user_id,
                                              source="stream", started=started, known=known,
                                              committed=tuple(self.committed), tail_from=self.committed_at)
        await self.socket.send_json({"type": "final", "text": result["text"], "language": result["language"],
                                     "duration_ms": result["duration_ms"], "engine": result["engine"],
                                     "processing_ms": result["processing_ms"],
                                     "recognised_ms": result["recognised_ms"]})
        await self.socket.close()

    def running_from(self) -> int:
        """Where the audio the running pass does not recognise begins."""
        return self.interim_at if self.running_until is None else self.running_until

    def drop_interim(self) -> None:
        """The running interim's text is not wanted: its task goes, and its pass stops before
        decoding (an encoder call already running ends on its own)."""
        self.abandon.set()
        if self.interim_task is not None:
            self.interim_task.cancel()

    async def covered_to_the_end(self, samples: np.ndarray) -> bool:
        """Did a finished pass recognise everything but silence after it?"""
        return self.covered is not None and await self.service.run(audio.is_silent, samples[self.covered[0]:])

    async def fail(self, message: str, error_type: str) -> None:
        if not self.socket.closed:
            await self.socket.send_json({"type": "error", "error": message, "errorType": error_type})
            await self.socket.close()

    async def release(self) -> None:
        self.drop_interim()
        if self.decoder is not None:
            self.decoder.close()
        if not self.socket.closed:
            await self.socket.close()
        self.service.streams.discard(self)


# ------------------------------------------------------------------ synthesis

MARKUP = [(re.compile(r"```.*?(```|$)", re.S), " "), (re.compile(r"`([^`]*)`"), r"\1"),
          (re.compile(r"!\[[^\]]*\]\([^)]*\)"), " "), (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),
          (re.compile(r"https?://\S+"), " "), (re.compile(r"^\s{0,3}(#{1,6}|>|[-*+]|\d+\.)\s+", re.M), ""),
          (re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1"), r"\2"), (re.compile(r"[#*_~|<>]+"), " "),
          (re.compile(r"\s+"), " ")]


def speakable(text: str) -> str:
    """Text without markdown marks, code or links: read aloud, they would be noise."""
    for pattern, replacement in MARKUP:
        text = pattern.sub(replacement, text)
    return text.strip()


@routes.post("/api/v1/tts", name="voice.tts")
@api_doc("Speak a text: the audio (WAV by default, MP3 or OGG/Opus) with its length in a header",
         body=TtsRequest, responses={200: {"audio/wav": None, "audio/mpeg": None, "audio/ogg": None}},
         errors=(400, 422, 502, 503), response_headers={"X-Audio-Duration-Ms": "Length of the audio",
                                                        "X-Voice": "The voice id that spoke"},
         description="400 `text_too_long`, `nothing_to_say` (only markup), `unknown_voice`; 422 "
                     "`language_unsupported` when no voice speaks the language.")
async def tts(request: web.Request) -> web.Response:
    await require_user(request)
    service = request.config_dict[SERVICE]
    body = await parse_body(request, TtsRequest())
    if len(body["text"]) > service.settings["max_tts_chars"]:
        raise BadRequest(f"The text is longer than {service.settings['max_tts_chars']} characters.",
                         error_type="text_too_long", hint="Split it into sentences and speak each.")
    text = speakable(body["text"])
    if not text:
        raise BadRequest("The text has nothing to say once markup and code are left out.",
                         error_type="nothing_to_say", hint="Send words.")
    engines = service.engines
    voices = {voice.id: voice for voice in engines.voices()}
    language = body.get("language") or "auto"
    if body.get("voice"):
        voice = voices.get(body["voice"])
        if voice is None:
            raise BadRequest(f"Unknown voice {body['voice']!r}.", error_type="unknown_voice",
                             hint="GET /api/v1/tts/voices lists the voices.")
    else:
        if language == "auto":
            language = guess_language(text)
        found = engines.voice_for(language)
        if found is None:
            raise ApiError(f"No voice of this service speaks the language {language!r}.",
                           error_type="language_unsupported", status=422,
                           hint="GET /api/v1/tts/status lists the languages spoken.")
        voice = found
    try:
        speech = await engines.synthesizer_of(voice).synthesize(text, voice, body["speed"])
    except EngineFailed as error:
        raise ApiError(f"The {voice.engine} engine failed: {error}", error_type=error.error_type,
                       status=error.status, hint="Try again, or another voice.") from None
    data = await service.run(audio.encode, speech.samples, speech.sample_rate, body["format"])
    duration_ms = int(len(speech.samples) * 1000 / speech.sample_rate) if speech.sample_rate else 0
    return web.Response(body=data, content_type=audio.ENCODINGS[body["format"]],
                        headers={"X-Audio-Duration-Ms": str(duration_ms), "X-Voice": voice.id})


@routes.get("/api/v1/tts/voices", name="voice.tts_voices")
@api_doc("The voices speech is synthesised with", responses={200: VoiceList})
async def tts_voices(request: web.Request) -> web.Response:
    await require_user(request)
    voices = request.config_dict[SERVICE].engines.voices()
    return web.json_response({"voices": [{"id": v.id, "name": v.name, "language": v.language, "engine": v.engine,
                                          "sample_rate": v.sample_rate} for v in voices], "count": len(voices)})


@routes.get("/api/v1/tts/status", name="voice.tts_status")
@api_doc("Synthesis engines, voices, default voice per language, and whether any voice is ready",
         responses={200: TtsStatus})
async def tts_status(request: web.Request) -> web.Response:
    await require_user(request)
    return web.json_response(request.config_dict[SERVICE].engines.tts_status())


# ------------------------------------------------------------------ the plugin

class EngineHttpOf:
    """The service's one HTTP session, for network engines, once it exists."""

    def __init__(self, context: Context):
        self._context = context

    @property
    def http(self) -> Any:
        return self._context.http


class VoiceEnginesPlugin(Plugin):
    name = "voice_engines"
    depends = ("auth_tokens",)
    description = "Speech to text (one-shot and streamed) and text to speech, offline engines by default"
    settings_schema = VoiceEngineSettings

    def setup(self, registrar: Registrar) -> None:
        settings = {**registrar.settings, "model_directory": registrar.settings["model_directory"]
                    or str(registrar.context.config.data_dir / "models")}
        engines = Engines.build(settings, EngineHttpOf(registrar.context))
        service = VoiceService(engines, settings, asyncio.Semaphore(settings["recognitions_at_once"]))
        registrar.routes(routes)
        registrar.app_state(SERVICE, service)

        async def load_engines(context: Context) -> AsyncIterator[None]:
            await engines.load()
            yield

        registrar.lifespan(load_engines)


plugin = VoiceEnginesPlugin()
