"""Streaming recognition (`/api/v1/transcribe/stream`): the WebSocket endpoint and its state
machine, audio frames in, interim and final text out (docs/voice.md, "Streaming")."""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import numpy as np
from aiohttp import WSMsgType, web

from gateway.errors import ApiError, BadRequest
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.validation import load

from . import audio
from .engines import EngineFailed, PassAbandoned, Recognition
from .recognition import SERVICE, VoiceService, caller, joined, recognize_with
from .schemas import StreamQuery

log = logging.getLogger("voice.service")
routes = web.RouteTableDef()
# Interim text is recognised on at most this much of the latest audio (Whisper's own window).
INTERIM_WINDOW_SECONDS = 30
# A stream's segment (recognised once and kept) holds at least this much audio before its pause:
# shorter pieces would lose the context Whisper recognises words by.
SEGMENT_MIN_SECONDS = 2.0
POLL_SECONDS = 0.2


def segment_end(samples: np.ndarray, start: int) -> int | None:
    """Where the stream's next segment ends: the middle of the last pause after at least
    SEGMENT_MIN_SECONDS of audio past `start` with speech after it; None while there is none."""
    pause = audio.last_pause(samples[start:], not_before=int(SEGMENT_MIN_SECONDS * audio.SAMPLE_RATE))
    return None if pause is None else start + pause


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
    socket = web.WebSocketResponse(heartbeat=30.0, max_msg_size=service.settings.max_audio_bytes + 1)
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
                                               self.settings.max_audio_seconds)
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
        idle = self.settings.stream_idle_seconds
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
                if self.received > self.settings.max_audio_bytes:
                    raise StreamError(f"The stream sent more than {self.settings.max_audio_bytes} bytes.",
                                      "audio_too_large")
                # Converting and resampling a chunk is CPU work (up to max_audio_bytes of it).
                await self.service.run(self.decoder.feed, message.data)
                if self.decoder.error is not None:
                    raise self.decoder.error
                if self.decoder.sample_count > self.settings.max_audio_seconds * audio.SAMPLE_RATE:
                    raise StreamError(f"The stream is longer than {self.settings.max_audio_seconds:g} seconds.",
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
        interval = int(self.settings.interim_interval_seconds * audio.SAMPLE_RATE)
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
            segments = self.settings.stream_segments and settled
            cut = await self.service.run(segment_end, whole, start) if segments else None
            end = len(whole) if cut is None else cut
            samples = whole[max(start, end - INTERIM_WINDOW_SECONDS * audio.SAMPLE_RATE):end]
            self.running_until = end
            if await self.service.run(audio.is_silent, samples):
                return
            # language=auto: the first interim long enough to tell detects the language, and the
            # rest of the stream (interims and final) keeps it; shorter ones use the default.
            engine, asked = self.service.recognizer(self.detected or language)
            if asked is None and len(samples) < self.settings.detect_min_seconds * audio.SAMPLE_RATE:
                engine, asked = self.service.recognizer(self.settings.default_language)
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
            await asyncio.wait([task], timeout=self.settings.max_audio_seconds)
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
