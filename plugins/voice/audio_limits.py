"""What audio is refused before it is decoded, and the error that refuses it: a sample rate or a
channel count out of range, or a length past the caller's limit, read from a header or a frame
before anything is resampled (docs/voice.md; the bounds are constants, not settings)."""
from __future__ import annotations

from typing import Any

# What every recognizer takes: all audio is decoded to 16 kHz mono.
SAMPLE_RATE = 16000
# Sample rates taken from a header or a caller. Resampling to 16 kHz makes SAMPLE_RATE / rate
# output samples of each input one: a header declaring 8 Hz turns an 81-byte FLAC into gigabytes.
# Speech below 4 kHz is not worth recognising, and nothing records above 192 kHz.
MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 4000, 192000
# More channels than any speech recording has (9.1.6 and third-order ambisonics have 16).
MAX_CHANNELS = 32
# Codecs whose declared length is exact (a count of samples or bytes), not FFmpeg's estimate
# from the bit rate (an MP3 without a Xing header): trusted to refuse a file before decoding it.
EXACT_LENGTH_CODECS = ("flac", "pcm_")


class AudioError(Exception):
    """Audio that cannot become speech: the service answers it with `success: false`."""

    def __init__(self, message: str, error_type: str, hint: str = "", status: int = 400):
        super().__init__(message)
        self.message, self.error_type, self.hint, self.status = message, error_type, hint, status


def check_rate(rate: int, what: str = "The audio") -> None:
    if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise AudioError(f"{what} declares a sample rate of {rate} Hz.", "sample_rate_unsupported",
                         f"Send audio sampled at {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz (16000 is best).")


def check_channels(channels: int, what: str = "The audio") -> None:
    if channels > MAX_CHANNELS:
        raise AudioError(f"{what} declares {channels} channels.", "audio_undecodable",
                         f"Send mono or stereo audio (at most {MAX_CHANNELS} channels).")


def too_long(max_seconds: float, what: str = "The audio") -> AudioError:
    return AudioError(f"{what} is longer than {max_seconds:g} seconds.", "audio_too_long",
                      "Send a shorter recording.", status=413)


def resampled_length(samples: int, rate: int) -> int:
    """How many 16 kHz samples `samples` at `rate` become: known before any is allocated."""
    return -(-samples * SAMPLE_RATE // rate)


def check_declared(stream: Any, max_seconds: float | None, what: str = "The audio") -> None:
    """Refuse from the header alone: a rate or channel count out of range, or (where the codec
    states it exactly) a length over `max_seconds`. Headers can lie: frames are checked too."""
    codec = stream.codec_context
    if codec.sample_rate:   # 0: not known before decoding
        check_rate(codec.sample_rate, what)
    check_channels(codec.channels, what)
    if (max_seconds is not None and stream.duration and stream.time_base
            and codec.name.startswith(EXACT_LENGTH_CODECS) and stream.duration * stream.time_base > max_seconds):
        raise too_long(max_seconds, what)
