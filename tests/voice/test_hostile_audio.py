"""Audio made to cost the service far more than its size: a few bytes declaring a sample rate of
a few hertz would become gigabytes once resampled to 16 kHz. Each is refused from what its
header declares, before anything is resampled, with the process's memory measured while the
service handles it; and a stream's decoding runs off the event loop."""
from __future__ import annotations

import asyncio
import struct
import threading
import time

import aiohttp
import numpy as np
import psutil
import pytest

from plugins.voice import audio, audio_limits
from tests.support.voice_gateway import (ai_core_url, chat_settings, gateway_port, make_voice_gateway,  # noqa: F401
                                         provider, token_for)
from tests.support.voice_gateway import ALICE as GATEWAY_ALICE
from tests.voice.conftest import ALICE

STREAM = "/api/v1/transcribe/stream"
MEMORY_BOUND = 200 * 1024 * 1024   # growth allowed while one hostile file is handled


def crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def flac(rate: int, *, block: int = 65535, frames: int = 3, declared_samples: int | None = None,
         frame_rates: list[int | None] | None = None) -> bytes:
    """A FLAC file: STREAMINFO declaring `rate` (mono, 16-bit) and `declared_samples`, then
    `frames` frames of `block` samples of one constant value (each frame a dozen bytes). A frame
    may name its own rate (`frame_rates`), as FLAC allows, instead of STREAMINFO's."""
    declared = block * frames if declared_samples is None else declared_samples
    info = 0
    for value, width in ((block, 16), (block, 16), (0, 24), (0, 24), (rate, 20), (0, 3), (15, 5),
                         (declared, 36), (0, 128)):
        info = (info << width) | value
    data = b"fLaC" + bytes([0x80, 0, 0, 34]) + info.to_bytes(34, "big")
    for number in range(frames):
        frame_rate = (frame_rates or [None] * frames)[number]
        rate_code, rate_bytes = (0, b"") if frame_rate is None else (0b1101, frame_rate.to_bytes(2, "big"))
        header = bytes([0xFF, 0xF8, 0b0111_0000 | rate_code, 0b0000_1000, number]) + (block - 1).to_bytes(2, "big")
        header += rate_bytes
        frame = header + bytes([crc8(header), 0x00]) + (1000).to_bytes(2, "big")   # a CONSTANT subframe
        data += frame + crc16(frame).to_bytes(2, "big")
    return data


def wav_header(rate: int, data_bytes: int) -> bytes:
    """The 44 bytes of a mono 16-bit PCM WAV header."""
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE" + b"fmt " + struct.pack("<I", 16)
            + struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", data_bytes))


class PeakMemory:
    """The growth of this process's resident memory (the service runs in it) while the block
    runs, sampled by a thread."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.peak = self.start = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="peak-memory", daemon=True)

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._done.wait(0.002)

    def __enter__(self) -> "PeakMemory":
        self.start = self.peak = self.process.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def growth(self) -> int:
        return self.peak - self.start


async def upload(client, data: bytes, **fields) -> tuple[int, dict]:
    body = aiohttp.FormData()
    body.add_field("audio", data, filename="audio.bin", content_type="application/octet-stream")
    for key, value in fields.items():
        body.add_field(key, str(value))
    response = await client.post("/api/v1/transcribe", headers=ALICE, data=body)
    return response.status, await response.json()


@pytest.fixture
async def light_service(make_voice_service):
    """The service with its lightest recogniser: these tests never get as far as recognising."""
    return await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[])


def test_the_hostile_flac_is_what_the_report_describes():
    data = flac(8)
    assert len(data) == 81
    assert len(wav_header(1, 16 * 1024)) == 44


async def test_an_81_byte_flac_declaring_8_hz_is_refused_before_resampling(light_service):
    with PeakMemory() as memory:
        status, body = await upload(light_service, flac(8), language="en")
    assert status == 400, body
    assert body["success"] is False and body["errorType"] == "sample_rate_unsupported"
    assert "8 Hz" in body["error"] and "4000" in body["hint"]
    assert memory.growth < MEMORY_BOUND, f"grew {memory.growth / 2**20:.0f} MiB"


async def test_through_the_gateway_as_any_signed_in_person(light_service, make_voice_gateway):
    gateway = await make_voice_gateway(str(light_service.make_url("")).rstrip("/"))
    body = aiohttp.FormData()
    body.add_field("audio", flac(8), filename="tiny.flac", content_type="audio/flac")
    body.add_field("language", "en")
    with PeakMemory() as memory:
        response = await gateway.post("/api/v1/voice/transcribe", data=body,
                                      headers={"Authorization": f"Bearer {token_for(gateway, GATEWAY_ALICE)}"})
        answer = await response.json()
    assert response.status == 400 and answer["errorType"] == "sample_rate_unsupported", answer
    assert answer["success"] is False
    assert memory.growth < MEMORY_BOUND


async def test_a_rate_out_of_range_in_a_later_frame_is_refused_too(light_service):
    # STREAMINFO and the first frames say 16 kHz; later frames say 8 Hz: checked frame by frame.
    data = flac(16000, block=4096, frames=6, declared_samples=0, frame_rates=[16000] * 4 + [8, 8])
    with PeakMemory() as memory:
        status, body = await upload(light_service, data, language="en")
    assert status == 400 and body["errorType"] == "sample_rate_unsupported", body
    assert memory.growth < MEMORY_BOUND


async def test_a_declared_length_over_the_limit_is_refused_before_decoding(make_voice_service):
    client = await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[], max_audio_seconds=10.0)
    # 4 kHz is allowed; three frames of 65535 samples declare 49 s.
    status, body = await upload(client, flac(4000), language="en")
    assert status == 413 and body["errorType"] == "audio_too_long" and "10 seconds" in body["error"], body


async def test_a_length_the_header_understates_is_still_bounded_while_decoding(make_voice_service):
    client = await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[], max_audio_seconds=10.0)
    # Declares one second; its frames hold 400 s.
    data = flac(4000, frames=25, declared_samples=4000)
    with PeakMemory() as memory:
        status, body = await upload(client, data, language="en")
    assert status == 413 and body["errorType"] == "audio_too_long", body
    assert memory.growth < MEMORY_BOUND


async def test_a_wav_upload_declaring_1_hz_is_refused(light_service):
    status, body = await upload(light_service, wav_header(1, 16 * 1024) + b"\1" * 16 * 1024, language="en")
    assert status == 400 and body["errorType"] == "sample_rate_unsupported", body


def test_pcm_too_long_for_its_rate_is_refused_before_resampling():
    # 1 MB of pcm at 4 kHz: 131 s, over a 120 s limit before anything is resampled.
    with pytest.raises(audio_limits.AudioError) as refused:
        audio.decode(b"\0" * 1_048_576, "pcm", 4000, max_seconds=120.0)
    assert refused.value.error_type == "audio_too_long" and refused.value.status == 413
    with pytest.raises(audio_limits.AudioError) as refused:
        audio.decode(b"\0" * 1000, "pcm", 1)
    assert refused.value.error_type == "sample_rate_unsupported"


async def test_a_wav_stream_declaring_1_hz_is_refused_at_its_header(light_service):
    with PeakMemory() as memory:
        async with light_service.ws_connect(f"{STREAM}?language=en&format=wav", headers=ALICE) as socket:
            assert (await socket.receive_json(timeout=10))["type"] == "ready"
            await socket.send_bytes(wav_header(1, 16 * 1024) + b"\1" * 16 * 1024)
            frames = [message.json() async for message in socket if message.type == aiohttp.WSMsgType.TEXT]
    assert frames[-1]["type"] == "error" and frames[-1]["errorType"] == "sample_rate_unsupported", frames
    assert "1 Hz" in frames[-1]["error"]
    assert memory.growth < MEMORY_BOUND, f"grew {memory.growth / 2**20:.0f} MiB"


async def test_a_stream_over_the_length_limit_is_refused_before_resampling(make_voice_service):
    client = await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[], max_audio_seconds=10.0)
    async with client.ws_connect(f"{STREAM}?language=en&format=wav", headers=ALICE) as socket:
        await socket.receive_json(timeout=10)
        # 4 kHz is allowed, but this one frame holds 100 s.
        await socket.send_bytes(wav_header(4000, 800_000) + b"\0" * 800_000)
        frames = [message.json() async for message in socket if message.type == aiohttp.WSMsgType.TEXT]
    assert frames[-1]["type"] == "error" and frames[-1]["errorType"] == "audio_too_long", frames


async def test_a_streams_chunk_is_decoded_off_the_event_loop(make_voice_service):
    """A big chunk that must be resampled (4 kHz, 17 minutes of it: seconds of work) leaves the
    event loop free: the service's health check answers meanwhile, and the loop keeps ticking."""
    client = await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[], max_audio_seconds=1200.0)
    pcm = b"\0" * 8_000_000
    gaps: list[float] = []
    processed = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not processed.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with client.ws_connect(f"{STREAM}?language=en&format=wav", headers=ALICE) as socket:
        await socket.receive_json(timeout=10)
        ticking = asyncio.create_task(ticker())
        await socket.send_bytes(wav_header(4000, len(pcm)) + pcm)
        health = await client.get("/api/v1/health")
        assert health.status == 200
        # Frames are handled in order: the answer to this one means the chunk was decoded.
        await socket.send_str("not a frame")
        answer = await socket.receive_json(timeout=60)
        processed.set()
        await ticking
        assert answer["errorType"] == "invalid_message"
    assert len(gaps) > 5 and max(gaps) < 1.0, f"the event loop stalled for {max(gaps):.2f} s"
