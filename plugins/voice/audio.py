"""Audio in and out, with FFmpeg's decoders and encoders inside the PyAV wheel.

In: any container FFmpeg knows (WAV, MP3, OGG/Opus, FLAC, WebM/Opus...), sniffed from the bytes,
plus raw `pcm`, which has no header and so is defined here: signed 16-bit little-endian mono at
16 kHz unless the caller names another `sample_rate`. Everything becomes 16 kHz mono float32,
what every recognizer takes (resampling.py), after the limits of audio_limits.py. These functions
block: callers run them in an executor.

A stream (`StreamDecoder`) is decoded as its chunks arrive: a thread per stream runs FFmpeg's
demuxer on a pipe the chunks are written into, so each byte is decoded once, never the whole
recording again from the start."""
from __future__ import annotations

import io
import logging
import threading
from typing import Any

import numpy as np

from .audio_limits import (SAMPLE_RATE, AudioError, check_channels, check_declared, check_rate, resampled_length,
                           too_long)
from .resampling import frames_to_samples, new_resampler, pcm_to_samples, resample_within

log = logging.getLogger("voice.audio")

# Below this RMS (about -55 dBFS) a recording holds no speech: answered as no_speech rather than
# handed to a recognizer that would make words up from noise.
SILENCE_RMS = 0.0018
# FFmpeg's demuxer names for the format hints the API accepts (a sniffed container wins).
CONTAINERS = {"webm": "matroska", "wav": "wav", "opus": "ogg", "ogg": "ogg", "mp3": "mp3", "flac": "flac",
              "m4a": "mp4", "mp4": "mp4", "aac": "aac"}
STREAM_FORMATS = ("webm", "wav", "pcm", "opus", "ogg")
ENCODINGS = {"wav": "audio/wav", "mp3": "audio/mpeg", "ogg": "audio/ogg"}


def decode(data: bytes, format_hint: str | None = None, sample_rate: int | None = None,
           max_seconds: float = 600.0) -> np.ndarray:
    """Any supported recording as 16 kHz mono float32. Raises AudioError: empty, undecodable,
    or longer than `max_seconds` (checked while decoding, so a small file that expands to hours
    of audio is stopped early)."""
    if not data:
        raise AudioError("The audio is empty.", "audio_empty", "Send a recording with speech in it.")
    if format_hint == "pcm":
        rate = sample_rate or SAMPLE_RATE
        check_rate(rate)
        if resampled_length(len(data) // 2, rate) > max_seconds * SAMPLE_RATE:
            raise too_long(max_seconds)
        samples = pcm_to_samples(data, rate)
    else:
        samples = _decode_container(data, format_hint, max_seconds)
    if len(samples) > max_seconds * SAMPLE_RATE:
        raise too_long(max_seconds)
    if not len(samples):
        raise AudioError("The audio holds no samples.", "audio_empty", "Send a recording with speech in it.")
    return samples


def _decode_container(data: bytes, format_hint: str | None, max_seconds: float) -> np.ndarray:
    import av
    attempts: list[str | None] = [None]
    if format_hint in CONTAINERS:
        attempts.append(CONTAINERS[format_hint])
    last_error: Exception | None = None
    for container_format in attempts:
        try:
            with av.open(io.BytesIO(data), format=container_format, mode="r",
                         metadata_errors="ignore") as container:
                if not container.streams.audio:
                    raise AudioError("The file holds no audio track.", "audio_undecodable",
                                     "Send WAV, MP3, OGG/Opus, FLAC, WebM or raw pcm.")
                stream = container.streams.audio[0]
                check_declared(stream, max_seconds)
                resampler, parts, total = new_resampler(), [], 0
                for frame in container.decode(stream):
                    for samples in resample_within(resampler, frame, total, max_seconds):
                        parts.append(samples)
                        total += len(samples)
                parts.extend(frames_to_samples(resampler.resample(None)))
                return np.concatenate(parts) if parts else np.zeros(0, np.float32)
        except AudioError:
            raise
        except (av.FFmpegError, ValueError, IndexError, EOFError) as error:
            last_error = error
    raise AudioError(f"The audio cannot be decoded ({type(last_error).__name__}: {last_error}).",
                     "audio_undecodable", "Send WAV, MP3, OGG/Opus, FLAC, WebM, or raw pcm (16 kHz mono "
                                          "s16le, or name its sample_rate).")


def is_silent(samples: np.ndarray) -> bool:
    return not len(samples) or float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) < SILENCE_RMS


# A pause (a stream's segments end in one): at least PAUSE_SECONDS of 20 ms frames PAUSE_DB
# quieter than the speech's loud frames (their 90th percentile), or under SILENCE_RMS. Words do
# not hold a third of a second of such quiet; sentence and clause breaks do.
# Speech must follow it (at least SPEECH_AFTER_SECONDS of louder frames): a click after a
# silence is not a next sentence.
PAUSE_SECONDS = 0.3
PAUSE_DB = 20.0
PAUSE_FRAME = SAMPLE_RATE // 50
SPEECH_AFTER_SECONDS = 0.2


def last_pause(samples: np.ndarray, *, not_before: int = 0) -> int | None:
    """The sample in the middle of the last pause that speech follows and that begins at or
    after `not_before`; None without one."""
    count = len(samples) // PAUSE_FRAME
    if count == 0:
        return None
    frames = samples[:count * PAUSE_FRAME].reshape(count, PAUSE_FRAME).astype(np.float64)
    loudness = np.sqrt(np.mean(np.square(frames), axis=1))
    quiet = loudness < max(SILENCE_RMS, float(np.percentile(loudness, 90)) * 10 ** (-PAUSE_DB / 20))
    shortest = int(PAUSE_SECONDS * SAMPLE_RATE / PAUSE_FRAME)
    speech_after = np.cumsum(~quiet[::-1])[::-1]   # louder frames from each frame to the end
    needed = int(SPEECH_AFTER_SECONDS * SAMPLE_RATE / PAUSE_FRAME)
    end = count
    while end > 0:
        while end > 0 and not quiet[end - 1]:
            end -= 1
        start = end
        while start > 0 and quiet[start - 1]:
            start -= 1
        if (end < count and speech_after[end] >= needed and end - start >= shortest
                and start * PAUSE_FRAME >= not_before):
            return (start + end) // 2 * PAUSE_FRAME
        if start * PAUSE_FRAME < not_before:
            return None
        end = start
    return None


def encode(samples: np.ndarray, sample_rate: int, audio_format: str) -> bytes:
    """Mono float32 as a WAV (16-bit PCM), MP3 or OGG/Opus file."""
    if audio_format == "wav":
        import wave
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as writer:
            writer.setnchannels(1)
            writer.setsampwidth(2)
            writer.setframerate(sample_rate)
            writer.writeframes((np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes())
        return buffer.getvalue()
    import av
    codec, rate = ("libmp3lame", sample_rate) if audio_format == "mp3" else ("libopus", 48000)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp3" if audio_format == "mp3" else "ogg") as container:
        stream: Any = container.add_stream(codec, rate=rate, layout="mono")
        frame_format = stream.codec_context.format.name
        resampler = av.AudioResampler(format=frame_format, layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1).astype(np.float32), format="flt", layout="mono")
        frame.sample_rate = sample_rate
        for resampled in resampler.resample(frame) + resampler.resample(None):
            for packet in stream.encode(resampled):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


class _Pipe(io.RawIOBase):
    """The bytes of a stream as a blocking, unseekable file: FFmpeg's demuxer reads it in the
    decoding thread and waits there for the next chunk."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = bytearray()
        self._ended = False
        self._condition = threading.Condition()

    def readable(self) -> bool:
        return True

    def write_chunk(self, data: bytes) -> None:
        with self._condition:
            self._buffer.extend(data)
            self._condition.notify_all()

    def end(self) -> None:
        with self._condition:
            self._ended = True
            self._condition.notify_all()

    def read(self, size: int = -1) -> bytes:
        with self._condition:
            while not self._buffer and not self._ended:
                self._condition.wait()
            if size < 0 or size >= len(self._buffer):
                size = len(self._buffer)
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data

    def readinto(self, target: Any) -> int:
        data = self.read(len(target))
        target[: len(data)] = data
        return len(data)


class StreamDecoder:
    """Chunks of one recording in, 16 kHz float32 samples out as they decode. `feed` converts
    a WAV or pcm chunk itself (CPU work: call it in an executor) and hands a WebM or OGG chunk to
    the decoding thread; `samples()` is what was decoded so far; `finish()` waits (call it in an
    executor) until every fed byte is decoded; `close()` frees the thread. Decoding stops with
    an AudioError (in `error`, and raised by `feed` and `finish`) at a sample rate out of range or
    once the audio would pass `max_seconds`, checked before anything is resampled."""

    def __init__(self, audio_format: str, sample_rate: int | None = None, max_seconds: float = 600.0):
        if audio_format not in STREAM_FORMATS:
            raise AudioError(f"Unknown stream format {audio_format!r}.", "unsupported_format",
                             f"Use one of {', '.join(STREAM_FORMATS)}.")
        self.audio_format = audio_format
        self.pcm_rate = sample_rate or SAMPLE_RATE
        check_rate(self.pcm_rate, "The stream")
        self.max_seconds = max_seconds
        self._parts: list[np.ndarray] = []
        self._count = 0
        self._lock = threading.Lock()
        self._pending = b""              # pcm: an odd byte waiting for its pair
        self.error: AudioError | None = None
        self._pipe: _Pipe | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._wav_header: bytearray | None = bytearray() if audio_format == "wav" else None
        self._channels, self._sample_type = 1, "<i2"
        self._stream_resampler: Any = None
        if audio_format not in ("pcm", "wav"):
            self._pipe = _Pipe()
            self._thread = threading.Thread(target=self._run, name=f"voice-decode-{audio_format}", daemon=True)
            self._thread.start()

    @property
    def sample_count(self) -> int:
        return self._count

    def _append(self, samples: np.ndarray) -> None:
        if len(samples):
            with self._lock:
                self._parts.append(samples)
                self._count += len(samples)

    def feed(self, chunk: bytes) -> None:
        if self.error is not None and self.error.error_type != "audio_undecodable":
            raise self.error
        if self._pipe is not None:
            self._pipe.write_chunk(chunk)
            return
        if self._wav_header is not None:
            # A WAV stream is its header and then raw PCM: read the header, then go on as pcm
            # (FFmpeg's WAV demuxer on a pipe holds samples back until the end).
            self._wav_header.extend(chunk)
            chunk = self._parse_wav_header()
            if not chunk:
                return
        width = np.dtype(self._sample_type).itemsize * self._channels
        data = self._pending + chunk
        usable = len(data) // width * width
        self._pending = data[usable:]
        samples = np.frombuffer(data[:usable], dtype=self._sample_type).astype(np.float32)
        if self._sample_type == "<i2":
            samples /= 32768.0
        if self._channels > 1:
            samples = samples.reshape(-1, self._channels).mean(axis=1)
        if self._count + resampled_length(len(samples), self.pcm_rate) > self.max_seconds * SAMPLE_RATE:
            self.error = too_long(self.max_seconds, "The stream")
            raise self.error
        if self.pcm_rate != SAMPLE_RATE and len(samples):
            samples = self._resample(samples)
        self._append(samples)

    def _resample(self, samples: np.ndarray) -> np.ndarray:
        """One resampler for the whole stream: chunk edges leave no clicks or rounding drift."""
        import av
        if self._stream_resampler is None:
            self._stream_resampler = new_resampler()
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1).astype(np.float32), format="flt", layout="mono")
        frame.sample_rate = self.pcm_rate
        parts = frames_to_samples(self._stream_resampler.resample(frame))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    def _parse_wav_header(self) -> bytes:
        """The PCM after a complete WAV header (b"" while the header is still arriving)."""
        header = self._wav_header
        assert header is not None
        if len(header) >= 12 and (header[:4] != b"RIFF" or header[8:12] != b"WAVE"):
            self._wav_header = None
            self.error = AudioError("The wav stream does not start with a WAV header.", "audio_undecodable",
                                    "Send a WAV file's bytes from its start, or use format=pcm.")
            raise self.error
        position = 12
        while position + 8 <= len(header):
            name = bytes(header[position:position + 4])
            size = int.from_bytes(header[position + 4:position + 8], "little")
            if name == b"data":
                rest = bytes(header[position + 8:])
                self._wav_header = None
                return rest
            if name == b"fmt " and position + 8 + 16 <= len(header):
                tag, channels, rate = (int.from_bytes(header[position + 8:position + 10], "little"),
                                       int.from_bytes(header[position + 10:position + 12], "little"),
                                       int.from_bytes(header[position + 12:position + 16], "little"))
                bits = int.from_bytes(header[position + 22:position + 24], "little")
                if (tag, bits) not in ((1, 16), (3, 32), (0xFFFE, 16)) or not channels or not rate:
                    self._wav_header = None
                    self.error = AudioError("The wav stream is not 16-bit PCM or 32-bit float.",
                                            "audio_undecodable", "Stream 16-bit PCM WAV, or use format=webm.")
                    raise self.error
                try:
                    check_rate(rate, "The wav stream")
                    check_channels(channels, "The wav stream")
                except AudioError as error:
                    self._wav_header = None
                    self.error = error
                    raise
                self._channels, self.pcm_rate = channels, rate
                self._sample_type = "<f4" if tag == 3 else "<i2"
            elif position + 8 + size > len(header):
                return b""
            position += 8 + size + (size & 1)
        return b""

    def samples(self) -> np.ndarray:
        with self._lock:
            if len(self._parts) > 1:
                self._parts = [np.concatenate(self._parts)]
            return self._parts[0] if self._parts else np.zeros(0, np.float32)

    def samples_since(self, start: int) -> np.ndarray:
        """The samples decoded after the first `start` ones, copying only those (cheap enough for
        the event loop when the tail is short: a stream's last few tenths of a second)."""
        with self._lock:
            tail, end = [], self._count
            for part in reversed(self._parts):
                if end <= start:
                    break
                tail.append(part[max(0, start - (end - len(part))):])
                end -= len(part)
        return np.concatenate(tail[::-1]) if tail else np.zeros(0, np.float32)

    def finish(self, timeout: float = 30.0) -> np.ndarray:
        """Every byte fed, decoded (blocks: run in an executor)."""
        if self._pipe is not None and self._thread is not None:
            self._pipe.end()
            self._thread.join(timeout)
        if self._stream_resampler is not None:
            self._append(np.concatenate(frames_to_samples(self._stream_resampler.resample(None)) or
                                        [np.zeros(0, np.float32)]))
            self._stream_resampler = None
        # Undecodable bytes after some audio leave that audio; a limit refuses the stream.
        if self.error is not None and (not self._count or self.error.error_type != "audio_undecodable"):
            raise self.error
        return self.samples()

    def close(self) -> None:
        """Stop decoding and free the thread (a dropped stream); safe to call twice."""
        self._closed = True
        if self._pipe is not None:
            self._pipe.end()

    def _run(self) -> None:
        import av
        assert self._pipe is not None
        container_format = CONTAINERS.get(self.audio_format)
        try:
            # Small probe: the container's header is enough to know the codec; a bigger one
            # would wait for seconds of audio before the first sample comes out.
            with av.open(self._pipe, mode="r", format=container_format, metadata_errors="ignore",
                         options={"probesize": "2048", "analyzeduration": "0"},
                         buffer_size=4096) as container:
                if not container.streams.audio:
                    raise AudioError("The stream holds no audio track.", "audio_undecodable")
                check_declared(container.streams.audio[0], None, "The stream")
                resampler = new_resampler()
                for packet in container.demux(audio=0):
                    if self._closed:
                        return
                    try:
                        frames = packet.decode()
                    except av.FFmpegError:
                        continue   # one damaged packet is skipped, not the stream
                    for frame in frames:
                        for samples in resample_within(resampler, frame, self._count, self.max_seconds,
                                                       "The stream"):
                            self._append(samples)
                for samples in frames_to_samples(resampler.resample(None)):
                    self._append(samples)
        except AudioError as error:
            self.error = error
        except Exception as error:  # noqa: BLE001 - FFmpeg's many failures all mean "cannot decode"
            self.error = AudioError(f"The {self.audio_format} stream cannot be decoded ({error}).",
                                    "audio_undecodable", f"Send {self.audio_format} audio as announced.")
        finally:
            self._pipe.end()
