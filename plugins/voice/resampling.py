"""Audio at any rate as 16 kHz mono float32, what every recognizer takes, with FFmpeg's
resampler (in the PyAV wheel). These functions block: callers run them in an executor."""
from __future__ import annotations

from typing import Any

import numpy as np

from .audio_limits import SAMPLE_RATE, check_rate, resampled_length, too_long


def new_resampler() -> Any:
    import av
    return av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)


def frames_to_samples(frames: list[Any]) -> list[np.ndarray]:
    return [frame.to_ndarray().reshape(-1).astype(np.float32, copy=False) for frame in frames]


def pcm_to_samples(data: bytes, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Raw `pcm` (s16le mono at `sample_rate`) as 16 kHz float32."""
    samples = np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    if sample_rate == SAMPLE_RATE or not len(samples):
        return samples
    return resample(samples, sample_rate, SAMPLE_RATE)


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    import av
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1).astype(np.float32), format="flt", layout="mono")
    frame.sample_rate = from_rate
    resampler = av.AudioResampler(format="flt", layout="mono", rate=to_rate)
    parts = frames_to_samples(resampler.resample(frame)) + frames_to_samples(resampler.resample(None))
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def resample_within(resampler: Any, frame: Any, total: int, max_seconds: float,
                    what: str = "The audio") -> list[np.ndarray]:
    """One decoded frame at 16 kHz, refused before resampling when its own rate is out of range
    or its output would take the audio past `max_seconds` (`total`: the samples so far)."""
    check_rate(frame.sample_rate, what)
    if total + resampled_length(frame.samples, frame.sample_rate) > max_seconds * SAMPLE_RATE:
        raise too_long(max_seconds, what)
    return frames_to_samples(resampler.resample(frame))
