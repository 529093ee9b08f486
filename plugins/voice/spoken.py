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
import hashlib
import io
import logging
import secrets
import wave
from typing import TYPE_CHECKING

from gateway.database import execute, fetch_all
from gateway.downloads import LinkSigner
from gateway.errors import ApiError
from gateway.text import language_of
from plugins.chat.contract import ReplyStream

from .voice_service_client import VoiceServiceClient, VoiceUnavailable, refused
from .speech import SentenceCutter

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.voice.spoken")

SPOKEN_MODES = ("voice_msg", "voice_assistant")
AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg", "ogg": "audio/ogg"}



def owner_of(user_id: str) -> str:
    """The audio folder of a user: not the id itself, which may hold any character."""
    return hashlib.sha256(b"voice-audio:" + user_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class AudioStore:
    """Reply audio in the blob store under `voice/replies/<owner>/<name>`, links to it, and
    its deletion after `retention_days` (each stored key is recorded in `voice_reply_audio`)."""

    def __init__(self, context: "Context", url_ttl: int, retention_days: float):
        self.context = context
        self.url_ttl = url_ttl
        self.retention_days = retention_days
        self.links = LinkSigner(context.config, "voice-audio")

    @staticmethod
    def key(owner: str, name: str) -> str:
        return f"voice/replies/{owner}/{name}"

    async def put(self, user_id: str, audio: bytes, extension: str) -> str:
        """Store `audio`; its signed URL."""
        owner, name = owner_of(user_id), f"{secrets.token_hex(16)}.{extension}"
        key = self.key(owner, name)
        # Recorded first: a blob is never stored without the row that lets it be deleted.
        await execute(self.context.db, "INSERT INTO voice_reply_audio (storage_key, user_id) VALUES (%s, %s)",
                      (key, user_id))
        await self.context.blobs.put(key, audio, AUDIO_TYPES.get(extension, ""))
        return self.url(owner, name)

    async def delete_old(self, limit: int = 500) -> int:
        """Delete up to `limit` stored audios older than the retention; how many."""
        rows = await fetch_all(self.context.db, "SELECT storage_key FROM voice_reply_audio WHERE created_at < "
                               "now() - %s * interval '1 day' ORDER BY created_at LIMIT %s",
                               (self.retention_days, limit))
        for row in rows:
            await self.context.blobs.delete(row["storage_key"])
            await execute(self.context.db, "DELETE FROM voice_reply_audio WHERE storage_key = %s",
                          (row["storage_key"],))
        return len(rows)

    async def count_of(self, user_id: str) -> dict[str, int]:
        """What deleting the person removes (auth contract `PERSON_DATA`)."""
        rows = await fetch_all(self.context.db, "SELECT count(*) AS n FROM voice_reply_audio WHERE user_id = %s",
                               (user_id,))
        return {"spoken_replies": int(rows[0]["n"])}

    async def delete_of(self, user_id: str) -> None:
        """Every stored spoken reply of a person being deleted, blob first (as `delete_old`)."""
        for row in await fetch_all(self.context.db, "SELECT storage_key FROM voice_reply_audio WHERE user_id = %s",
                                   (user_id,)):
            await self.context.blobs.delete(row["storage_key"])
            await execute(self.context.db, "DELETE FROM voice_reply_audio WHERE storage_key = %s",
                          (row["storage_key"],))

    async def sweep(self, context: "Context", interval: float = 3600.0) -> None:
        """The job: old reply audio goes, hour by hour."""
        while True:
            try:
                while await self.delete_old() == 500:
                    pass
            except Exception as error:  # an outage must not end the job
                log.warning("deleting old reply audio failed: %r", error)
            await asyncio.sleep(interval)

    def url(self, owner: str, name: str) -> str:
        base = str(self.context.config.get("core.public_base_url") or "").rstrip("/")
        return f"{base}/api/v1/voice/audio/{owner}/{name}?{self.links.query(f'{owner}/{name}', self.url_ttl)}"


class SpokenReplies:
    """The tap's factory, and what every spoken reply of this service shares."""

    def __init__(self, context: "Context", client: VoiceServiceClient, audio: AudioStore, settings: dict):
        self.context, self.client, self.audio = context, client, audio
        self.enabled: bool = settings["spoken_replies"]
        self.format: str = settings["tts_format"]
        self.speed: float = settings["tts_speed"]
        self.voices = {"en": settings["voice_en"], "zh": settings["voice_zh"]}
        self.max_sentence_chars: int = settings["max_sentence_chars"]
        self.synthesis = asyncio.Semaphore(settings["synthesis_concurrency"])

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
