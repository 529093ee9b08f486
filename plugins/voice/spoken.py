"""Spoken replies: a chat reply tap (plugins/chat/contract.py REPLY_TAPS) for the modes
`voice_msg` and `voice_assistant`. The reply is cut into sentences as it streams (speech.py);
each sentence is synthesized by the voice service as soon as it is complete, stored in the blob
store, and sent as a `stream_segments` frame `{index, text, audio_url, duration_ms}` in order;
`stream_end` waits for them and carries `full_audio_url`, the whole reply's audio.

A sentence that cannot be synthesized (the voice service is down, refuses the text) still gets
its frame, with `audio_url` "" and an `error`: the text reply is never harmed. The audio is
reached at `/api/v1/voice/audio/<owner>/<name>` (gateway.py): by its owner's bearer token, or by
the signed link the frames carry until it expires (gateway.downloads.LinkSigner)."""
from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import wave
from typing import TYPE_CHECKING

from gateway.errors import ApiError
from gateway.text import language_of
from plugins.chat.contract import ReplyStream

from .audio_store import AUDIO_TYPES, AudioStore
from .voice_service_client import VoiceServiceClient, VoiceUnavailable, refused
from .speech import SentenceCutter
from .settings import VoiceSettings

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.voice.spoken")

SPOKEN_MODES = ("voice_msg", "voice_assistant")
class SpokenReplies:
    """The tap's factory, and what every spoken reply of this service shares."""

    def __init__(self, context: "Context", client: VoiceServiceClient, audio: AudioStore, settings: VoiceSettings):
        self.context, self.client, self.audio = context, client, audio
        self.enabled: bool = settings.spoken_replies
        self.format: str = settings.tts_format
        self.speed: float = settings.tts_speed
        self.voices = {"en": settings.voice_en, "zh": settings.voice_zh}
        self.max_sentence_chars: int = settings.max_sentence_chars
        self.synthesis = asyncio.Semaphore(settings.synthesis_concurrency)

    def tap(self, stream: ReplyStream) -> "SpokenReply | None":
        return SpokenReply(self, stream) if self.enabled else None

    async def synthesize(self, text: str, reply: "SpokenReply") -> tuple[bytes, str, int]:
        """(audio, file extension, duration in ms) of one sentence; ApiError when it cannot be had."""
        language = language_of(text)
        body: dict = {"text": text, "language": language, "format": self.format, "speed": self.speed}
        if self.voices.get(language):
            body["voice"] = self.voices[language]
        async with self.synthesis:
            if reply.unavailable is not None:  # no use waiting for the timeout again
                raise reply.unavailable
            try:
                answer = await self.client.synthesize(body)
            except VoiceUnavailable as error:
                reply.unavailable = error
                raise
        if answer.status >= 400:
            raise refused(answer.status, answer.json() or {})
        try:
            duration = int(float(answer.headers.get("X-Audio-Duration-Ms") or 0))
        except ValueError:
            duration = 0
        extension = next((ext for ext, kind in AUDIO_TYPES.items() if kind == answer.content_type), self.format)
        return answer.body, extension, duration


class SpokenReply:
    """One reply being spoken (chat's ReplyTap)."""

    def __init__(self, replies: SpokenReplies, stream: ReplyStream):
        self.replies, self.stream = replies, stream
        self.cutter = SentenceCutter(replies.max_sentence_chars)
        self.segments: list[asyncio.Task] = []
        # Set when the voice service could not be reached: the reply's later sentences are not
        # sent to it again (each would wait for the timeout), they get their error at once.
        self.unavailable: VoiceUnavailable | None = None

    def feed(self, text: str) -> None:
        for sentence in self.cutter.feed(text):
            self._start(sentence)

    async def finish(self, text: str) -> dict:
        for sentence in self.cutter.flush():
            self._start(sentence)
        if not self.segments:
            return {}
        results = await asyncio.gather(*self.segments, return_exceptions=True)
        spoken = [result for result in results if isinstance(result, tuple)]
        if not spoken:
            return {"full_audio_url": ""}
        if len(spoken) == 1:
            audio, extension = spoken[0]
        else:
            joined = await asyncio.get_running_loop().run_in_executor(None, join_wav, [a for a, _ in spoken])
            if joined is None:  # not all WAV of one kind: the first sentence's audio stands for none
                return {"full_audio_url": ""}
            audio, extension = joined, "wav"
        try:
            return {"full_audio_url": await self.replies.audio.put(self.stream.user_id, audio, extension)}
        except Exception as error:
            log.warning("storing the audio of reply %s failed: %r", self.stream.turn_id, error)
            return {"full_audio_url": ""}

    async def abort(self) -> None:
        for task in self.segments:
            task.cancel()
        await asyncio.gather(*self.segments, return_exceptions=True)

    def _start(self, sentence: str) -> None:
        previous = self.segments[-1] if self.segments else None
        self.segments.append(asyncio.create_task(self._segment(len(self.segments), sentence, previous)))

    async def _segment(self, index: int, text: str, previous: asyncio.Task | None) -> tuple[bytes, str] | None:
        """Synthesize and store one sentence (beside the others), then send its frame after the
        previous sentence's: devices get the segments in order."""
        segment: dict = {"index": index, "text": text, "audio_url": "", "duration_ms": 0}
        result = None
        try:
            audio, extension, duration = await self.replies.synthesize(text, self)
            segment["audio_url"] = await self.replies.audio.put(self.stream.user_id, audio, extension)
            segment["duration_ms"] = duration or wav_duration_ms(audio)
            result = (audio, extension)
        except asyncio.CancelledError:
            raise
        except ApiError as error:
            log.warning("sentence %d of reply %s was not synthesized: %s", index, self.stream.turn_id, error.error)
            segment["error"] = error.error
        except Exception as error:
            log.warning("sentence %d of reply %s was not synthesized or stored: %r", index, self.stream.turn_id, error)
            segment["error"] = "The sentence could not be synthesized."
        if previous is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(previous)
        await self.stream.emit({"type": "stream_segments", "role": "assistant", "msg_type": "chat",
                                "message_id": self.stream.message_id, "segments": [segment]})
        return result


def wav_duration_ms(audio: bytes) -> int:
    try:
        with wave.open(io.BytesIO(audio)) as reader:
            return int(reader.getnframes() * 1000 / reader.getframerate())
    except (wave.Error, EOFError, ZeroDivisionError):
        return 0


def join_wav(parts: list[bytes]) -> bytes | None:
    """The WAV files one after another as one; None unless all are WAV of one kind."""
    frames, params = [], None
    try:
        for part in parts:
            with wave.open(io.BytesIO(part)) as reader:
                kind = (reader.getnchannels(), reader.getsampwidth(), reader.getframerate())
                if params is not None and kind != params:
                    return None
                params = kind
                frames.append(reader.readframes(reader.getnframes()))
    except (wave.Error, EOFError):
        return None
    assert params is not None
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(params[0])
        writer.setsampwidth(params[1])
        writer.setframerate(params[2])
        writer.writeframes(b"".join(frames))
    return out.getvalue()
