"""Voice over the chat socket: `voice_input` (one recording) and the streaming session
(`voice_stream_start` / `_chunk` / `_end`), as spec/gateway-api.md's "Streaming voice session"
table says, with the error rows of docs/voice.md ("In the gateway").

One stream per connection at most, held here by connection id. A stream is a WebSocket to the
voice service's recognizer: chunks go there as binary frames in their `sequence` order, its
interim texts come back as `voice_interim` frames, and after `voice_stream_end` its final text is
`voice_final` and then a chat turn through CHAT_TURNS (queue, lock, de-duplication by the
stream's message_id, echo to the user's other devices). Whatever ends a stream (its end, an error,
a limit, silence, the device going away) closes the recognizer and cancels its tasks."""
from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

import aiohttp

from gateway.clock import now_ms
from gateway.errors import ApiError
from gateway.ws import error_frame as core_error_frame
from plugins.chat.contract import CHAT_TURNS, ChatTurns

from .voice_service_client import VoiceServiceClient, VoiceRefused, VoiceUnavailable
from .settings import VoiceSettings

if TYPE_CHECKING:
    from gateway.connection import Connection
    from gateway.context import Context

log = logging.getLogger("plugins.voice.streams")
# Chunks that came early and are held while an earlier one is awaited; the next one past them
# gives the awaited chunk up as missing (an `error` frame names it) and the stream goes on.
REORDER_WINDOW = 16


def error_frame(error: str, error_type: str, **extra: Any) -> dict:
    """Errors on /ws/chat carry msg_type `system_info` like chat's own."""
    return core_error_frame(error, msg_type="system_info", errorType=error_type, timestamp=now_ms(), **extra)


async def decode_audio(data: str, limit: int) -> bytes:
    """Base64 audio of at most `limit` bytes (ApiError otherwise); a large one is decoded off
    the event loop (10 MB take tens of milliseconds)."""
    if len(data) > 256 * 1024:
        return await asyncio.get_running_loop().run_in_executor(None, decoded_audio, data, limit)
    return decoded_audio(data, limit)


def decoded_audio(data: str, limit: int) -> bytes:
    if len(data) > (limit + 2) // 3 * 4 + 4:
        raise ApiError(f"The audio is larger than {limit // (1024 * 1024)} MB.", error_type="file_too_large",
                       status=413)
    try:
        audio = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError("audio_data is not valid base64.", error_type="invalid_audio") from None
    if not audio:
        raise ApiError("audio_data is empty.", error_type="invalid_audio")
    if len(audio) > limit:
        raise ApiError(f"The audio is larger than {limit // (1024 * 1024)} MB.", error_type="file_too_large",
                       status=413)
    return audio


class VoiceStream:
    def __init__(self, streams: "VoiceStreams", connection: "Connection", ws: aiohttp.ClientWebSocketResponse,
                 *, session_id: str, mode: str, language: str):
        self.streams, self.connection, self.ws = streams, connection, ws
        self.session_id, self.mode, self.language = session_id, mode, language
        self.message_id = "voice_" + secrets.token_hex(8)
        self.started = time.monotonic()
        self.received = 0
        # Chunks are forwarded in `sequence` order: the next one due, and those that came early.
        self.next_sequence = 0
        self.held: dict[int, bytes] = {}
        self.ending = False
        self.final: asyncio.Future = asyncio.get_running_loop().create_future()
        self.last_chunk = self.started
        self._last_interim = ""
        self._reader = asyncio.create_task(self._read(), name=f"voice-stream-read-{self.message_id}")
        self._watcher = asyncio.create_task(self._watch(), name=f"voice-stream-watch-{self.message_id}")

    def frame(self, kind: str, text: str, **extra: Any) -> dict:
        return {"type": kind, "role": "user", "msg_type": "chat", "message_id": self.message_id,
                "session_id": self.session_id, "text": text, "content": text, "timestamp": now_ms(), **extra}

    async def chunk(self, audio: bytes, sequence: int | None) -> None:
        """Forward a chunk in `sequence` order: one that comes early is held (up to
        REORDER_WINDOW numbers past the one awaited) until those before it came; one sent twice is
        dropped; one without a sequence is forwarded as it comes."""
        if sequence is not None and (sequence < self.next_sequence or sequence in self.held):
            return  # a chunk sent twice: already forwarded or held
        self.received += len(audio)   # held chunks count: the limit bounds what is held too
        if self.received > self.streams.max_bytes:
            await self.fail(f"The voice stream passed its limit of {self.streams.max_bytes} bytes of audio; "
                            f"it was closed.", "voice_stream_too_large")
            return
        self.last_chunk = time.monotonic()
        if sequence is None:
            await self._forward([audio])
            return
        self.held[sequence] = audio
        await self._forward(self._due(give_up_before=sequence - REORDER_WINDOW))

    def _due(self, give_up_before: int) -> list[bytes]:
        """The held chunks that can go now, in order. A gap before `give_up_before` is given up:
        named in an `error` frame and skipped."""
        due: list[bytes] = []
        while True:
            while self.next_sequence in self.held:
                due.append(self.held.pop(self.next_sequence))
                self.next_sequence += 1
            if not self.held or self.next_sequence >= give_up_before:
                return due
            first_held = min(self.held)
            self._missing(self.next_sequence, first_held - 1)
            self.next_sequence = first_held

    def _missing(self, first: int, last: int) -> None:
        """Tell the device that chunks `first`..`last` were given up (the stream stays open)."""
        which = f"chunk with sequence {first}" if first == last else f"chunks with sequence {first} to {last}"
        self.connection.send(error_frame(
            f"The voice stream's {which} never came while later ones did; the stream goes on without "
            f"{'it' if first == last else 'them'}.", "voice_chunk_missing", session_id=self.session_id))

    async def _forward(self, pieces: list[bytes]) -> None:
        for audio in pieces:
            try:
                await self.ws.send_bytes(audio)
            except (aiohttp.ClientError, ConnectionError, RuntimeError):
                await self.fail("The voice service stopped taking the stream; it was closed.",
                                "voice_service_unreachable")
                return

    async def end(self) -> dict:
        """Stop the recognizer and wait for its final text: {"text", "language", "duration_ms", ...}."""
        self.ending = True
        self._watcher.cancel()
        # Chunks still held wait for ones that will not come now: the gaps are named, the rest sent.
        await self._forward(self._due(give_up_before=max(self.held, default=self.next_sequence) + 1))
        try:
            await self.ws.send_str('{"type": "stop"}')
        except (aiohttp.ClientError, ConnectionError, RuntimeError):
            raise VoiceUnavailable("The voice service stopped before the stream's end.") from None
        try:
            return await asyncio.wait_for(asyncio.shield(self.final), self.streams.final_timeout)
        except asyncio.TimeoutError:
            raise VoiceUnavailable(f"The voice service gave no final text within "
                                   f"{self.streams.final_timeout:g} seconds.") from None

    async def fail(self, error: str, error_type: str) -> None:
        """End the stream with an `error` frame to its device."""
        if self.streams.forget(self):
            self.connection.send(error_frame(error, error_type, session_id=self.session_id))
        await self.close()

    async def close(self) -> None:
        """Free the recognizer: its socket, its tasks."""
        self.streams.forget(self)
        current = asyncio.current_task()
        others = [task for task in (self._reader, self._watcher) if task is not current]
        for task in others:
            task.cancel()
        # The reader must be gone before the socket closes: a close with a receive pending waits for it.
        await asyncio.gather(*others, return_exceptions=True)
        if not self.final.done():
            self.final.set_exception(VoiceUnavailable("The voice stream was closed."))
            self.final.exception()  # retrieved: nobody may wait for it
        with contextlib.suppress(Exception):
            await self.ws.close()


    async def _read(self) -> None:
        """The recognizer's messages: interims to the device, the final text to `end`."""
        try:
            async for message in self.ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    body = message.json()
                except ValueError:
                    continue
                kind = body.get("type") if isinstance(body, dict) else None
                if kind == "interim" and not self.ending:
                    text = str(body.get("text") or "")
                    if text != self._last_interim:
                        self._last_interim = text
                        self.connection.send(self.frame("voice_interim", text, is_final=False))
                elif kind == "final":
                    if not self.final.done():
                        self.final.set_result(body)
                    return
                elif kind == "error":
                    error = VoiceRefused(str(body.get("error") or "The voice service failed the stream."),
                                         error_type=str(body.get("errorType") or "voice_service_failed"))
                    if not self.final.done():
                        self.final.set_exception(error)
                        self.final.exception()
                    if not self.ending:
                        await self.fail(error.error, error.error_type or "voice_service_failed")
                    return
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("reading voice stream %s failed: %r", self.message_id, error)
        if not self.final.done():
            self.final.set_exception(VoiceUnavailable("The voice service closed the stream without a final text."))
            self.final.exception()
            if not self.ending:
                await self.fail("The voice service closed the stream; it was closed.", "voice_service_unreachable")

    async def _watch(self) -> None:
        """Silence (no chunk for `idle_timeout`) and length (`max_seconds`) end the stream."""
        streams = self.streams
        deadline = self.started + streams.max_seconds
        while True:
            now = time.monotonic()
            if now >= deadline:
                await self.fail(f"The voice stream passed its limit of {streams.max_seconds:g} seconds; "
                                f"it was closed.", "voice_stream_too_long")
                return
            if now - self.last_chunk >= streams.idle_timeout:
                await self.fail(f"No audio came for {streams.idle_timeout:g} seconds; the voice stream "
                                f"was closed.", "voice_stream_idle")
                return
            await asyncio.sleep(min(deadline, self.last_chunk + streams.idle_timeout) - now)


class VoiceStreams:
    """The open streams of this instance, by connection id, and the voice frames' handlers."""

    def __init__(self, context: "Context", client: VoiceServiceClient, settings: VoiceSettings):
        self.context, self.client = context, client
        self.max_upload_bytes: int = settings.max_upload_bytes
        self.max_bytes: int = settings.stream_max_bytes
        self.max_seconds: float = settings.stream_max_seconds
        self.idle_timeout: float = settings.stream_idle_timeout
        self.final_timeout: float = settings.final_timeout
        self._open: dict[str, VoiceStream] = {}
        self._endings: set[asyncio.Task] = set()

    def forget(self, stream: VoiceStream) -> bool:
        """Take `stream` out of the open ones; False when it was not (any more) open."""
        if self._open.get(stream.connection.id) is stream:
            del self._open[stream.connection.id]
            return True
        return False

    def open_count(self) -> int:
        return len(self._open)

    @property
    def turns(self) -> ChatTurns:
        return self.context.contracts.require(CHAT_TURNS)

    # ------------------------------------------------------------------ frames

    async def voice_input(self, connection: "Connection", frame: dict) -> None:
        identity = connection.identity
        assert identity is not None
        # An ApiError is answered by the chat socket's dispatch (gateway.ws.dispatch_frame), which
        # names the frame's session_id and client_msg_id: the ones resolved here are stored in it.
        session_id = frame["session_id"] = frame["session_id"] or self.turns.session_of(connection)
        audio = await decode_audio(frame["audio_data"], self.max_upload_bytes)
        answer = await self.client.transcribe(audio, user_id=identity.user_id, language=frame["language"],
                                              audio_format=frame["format"])
        body = answer.json() or {}
        message_id = "voice_" + secrets.token_hex(8)
        if answer.status >= 400 or not body.get("success", True):
            if body.get("errorType") != "no_speech":
                connection.send(error_frame(str(body.get("error") or "The audio could not be transcribed."),
                                            str(body.get("errorType") or "transcription_failed"),
                                            session_id=session_id, client_msg_id=frame["client_msg_id"]))
                return
            body = {"text": ""}
        text = str(body.get("text") or "").strip()
        connection.send({"type": "voice_transcript", "role": "user", "msg_type": "chat", "message_id": message_id,
                         "session_id": session_id, "text": text, "content": text, "success": True,
                         "language": str(body.get("language") or ""), "duration_ms": int(body.get("duration_ms") or 0),
                         "client_msg_id": frame["client_msg_id"], "timestamp": now_ms()})
        if text:
            frame["client_msg_id"] = frame["client_msg_id"] or message_id
            await self._submit(connection, session_id, text, frame["mode"], frame["client_msg_id"])

    async def start(self, connection: "Connection", frame: dict) -> None:
        identity = connection.identity
        assert identity is not None
        session_id = frame["session_id"] = frame["session_id"] or self.turns.session_of(connection)
        existing = self._open.get(connection.id)
        if existing is not None:
            await existing.fail("A voice stream was already open; both are closed. Start again.",
                                "voice_stream_already_open")
            return
        ws = await self.client.open_stream(frame["language"], frame["format"], frame["sample_rate"],
                                           user_id=identity.user_id)
        if connection.closing or connection.ws.closed:  # the device went while the recognizer opened
            with contextlib.suppress(Exception):
                await ws.close()
            return
        stream = VoiceStream(self, connection, ws, session_id=session_id, mode=frame["mode"],
                             language=frame["language"])
        self._open[connection.id] = stream
        connection.send(stream.frame("voice_interim", "", is_final=False))

    async def chunk(self, connection: "Connection", frame: dict) -> None:
        stream = self._open.get(connection.id)
        if stream is None:
            connection.send(error_frame("No voice stream is open; send voice_stream_start first.",
                                        "voice_stream_not_open"))
            return
        try:
            audio = await decode_audio(frame["audio_data"], self.max_bytes)
        except ApiError as error:
            await stream.fail(f"{error.error} The voice stream was closed.", error.error_type or "invalid_audio")
            return
        await stream.chunk(audio, frame["sequence"])

    async def end(self, connection: "Connection", frame: dict) -> None:
        stream = self._open.get(connection.id)
        if stream is None:
            connection.send(error_frame("No voice stream is open; send voice_stream_start first.",
                                        "voice_stream_not_open"))
            return
        self.forget(stream)
        # The final text may take a moment: the connection's other frames are not held up for it.
        self._track(asyncio.create_task(self._finish(stream), name=f"voice-stream-end-{stream.message_id}"))

    def _track(self, task: asyncio.Task) -> None:
        self._endings.add(task)
        task.add_done_callback(self._endings.discard)

    async def _finish(self, stream: VoiceStream) -> None:
        connection = stream.connection
        try:
            final = await stream.end()
        except ApiError as error:
            connection.send(error_frame(error.error, error.error_type or "voice_service_failed",
                                        session_id=stream.session_id))
            return
        finally:
            await stream.close()
        text = str(final.get("text") or "").strip()
        connection.send(stream.frame("voice_final", text, is_final=True, language=str(final.get("language") or ""),
                                     duration_ms=int(final.get("duration_ms") or 0)))
        if text:  # an empty final text means no speech: no turn
            try:
                await self._submit(connection, stream.session_id, text, stream.mode, stream.message_id)
            except ApiError as error:  # a task of its own: no frame's dispatch is there to answer it
                connection.send(error_frame(error.error, error.error_type or "bad_request",
                                            session_id=stream.session_id, client_msg_id=stream.message_id))

    async def _submit(self, connection: "Connection", session_id: str, text: str, mode: str,
                      client_msg_id: str) -> None:
        identity = connection.identity
        assert identity is not None
        await self.turns.submit_turn(identity.user_id, session_id, text, mode,
                                     exclude_connection_id=connection.id, client_msg_id=client_msg_id)

    # ------------------------------------------------------------------ lifecycle

    async def disconnected(self, connection: "Connection") -> None:
        """The device went: its open stream's recognizer is freed."""
        stream = self._open.pop(connection.id, None)
        if stream is not None:
            # In a task of its own: the connection's handler, which runs this, is being cancelled.
            self._track(asyncio.create_task(stream.close(), name=f"voice-stream-close-{stream.message_id}"))

    async def close_all(self) -> None:
        for stream in list(self._open.values()):
            await stream.close()
        for task in list(self._endings):
            task.cancel()
        await asyncio.gather(*self._endings, return_exceptions=True)
