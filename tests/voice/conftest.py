"""Fixtures of the voice service's tests: the service built by the production factory on a
loopback port, its real engines (Whisper's packaged model is loaded once per test session: the
engine keeps one model per process), and real recordings of people (bench/voice/recordings)."""
from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import av
import numpy as np
import pytest

from gateway.app import create_app
from plugins.auth import tokens_plugin
from plugins.voice import audio, audio_limits
from plugins.voice.service import plugin as voice_plugin
from bench.voice.scoring import edit_distance
from tests.ai_core.conftest import SERVICE, access_token, bearer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
RECORDINGS = Path(__file__).resolve().parents[2] / "bench" / "voice" / "recordings"
ENGLISH = RECORDINGS / "sense_and_sensibility_01_austen_64kb-0880.wav"   # "he was not an ill disposed young man"
CHINESE = RECORDINGS / "audioeval-zh-nihao_shijie.wav"                     # 你好世界
ALICE = bearer(access_token("user_alice", "alice"))
# The one offline Mandarin voice is Debian's espeak-ng, which bin/test installs where it can.
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng is not installed (Debian package): Mandarin speech tests skipped")
__all__ = ["SERVICE", "ALICE", "ENGLISH", "CHINESE", "needs_espeak"]


def voice_settings(**settings) -> dict:
    return {"plugins.voice_engines": settings}


@pytest.fixture
def make_voice_service(aiohttp_client, make_config):
    """The voice-service; keyword arguments are `[plugins.voice_engines]` settings."""
    async def build(**settings):
        config = make_config(voice_settings(**settings))
        return await aiohttp_client(create_app("voice-service", config, plugins=[tokens_plugin, voice_plugin]))
    return build


@pytest.fixture
async def voice_service(make_voice_service):
    return await make_voice_service(stt_engines=["whisper"], tts_engines=["piper", "espeak"])


def samples_of(path: Path) -> np.ndarray:
    return audio.decode(path.read_bytes())


def encoded(samples: np.ndarray, container: str, codec: str, rate: int = 16000) -> bytes:
    """A recording re-encoded with FFmpeg (PyAV) into `container`/`codec`."""
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container) as output:
        stream = output.add_stream(codec, rate=rate, layout="mono")
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1).astype(np.float32), format="flt", layout="mono")
        frame.sample_rate = audio_limits.SAMPLE_RATE
        for resampled in resampler.resample(frame) + resampler.resample(None):
            for packet in stream.encode(resampled):
                output.mux(packet)
        for packet in stream.encode(None):
            output.mux(packet)
    return buffer.getvalue()


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() or c.isspace() else " " for c in text.replace("-", " ")).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    return edit_distance(words(reference), words(hypothesis)) / max(1, len(words(reference)))


def character_error_rate(reference: str, hypothesis: str) -> float:
    keep = [c for c in reference if c.isalnum()]
    return edit_distance(keep, [c for c in hypothesis if c.isalnum()]) / max(1, len(keep))

