"""Decoding a stream as it arrives: the WebM demuxer gives samples before the stream ends (it
is not re-decoded from the start), and a dropped stream's thread ends."""
from __future__ import annotations

import time

import numpy as np
import pytest

from plugins.voice import audio, audio_limits
from tests.voice.conftest import ENGLISH, encoded, samples_of


@pytest.mark.parametrize("container,audio_format", [("webm", "webm"), ("ogg", "ogg")])
def test_a_stream_decodes_while_chunks_arrive(container, audio_format):
    original = samples_of(ENGLISH)
    data = encoded(original, container, "libopus", 48000)
    decoder = audio.StreamDecoder(audio_format)
    half = len(data) // 2
    for start in range(0, half, 500):
        decoder.feed(data[start:min(start + 500, half)])
    deadline = time.monotonic() + 10
    while decoder.sample_count < audio_limits.SAMPLE_RATE // 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    partial = decoder.sample_count
    assert partial >= audio_limits.SAMPLE_RATE // 2, "no audio decoded before the stream ended"  # of 1.5 s fed
    for start in range(half, len(data), 500):
        decoder.feed(data[start:start + 500])
    whole = decoder.finish()
    assert abs(len(whole) - len(original)) < 0.05 * audio_limits.SAMPLE_RATE
    assert partial < len(whole)


def test_a_dropped_stream_frees_its_thread():
    decoder = audio.StreamDecoder("webm")
    decoder.feed(encoded(samples_of(ENGLISH), "webm", "libopus", 48000)[:3000])
    decoder.close()
    assert decoder._thread is not None
    decoder._thread.join(5)
    assert not decoder._thread.is_alive()


def test_garbage_in_a_stream_is_reported():
    decoder = audio.StreamDecoder("webm")
    decoder.feed(b"not a webm stream at all " * 200)
    with pytest.raises(audio_limits.AudioError) as raised:
        decoder.finish()
    assert raised.value.error_type == "audio_undecodable"


def test_a_stream_decoders_tail_is_the_samples_after_a_point():
    decoder = audio.StreamDecoder("pcm")
    everything = np.arange(-3000, 3000, dtype=np.int16)
    for start in range(0, len(everything), 700):   # parts of 700 samples
        decoder.feed(everything[start:start + 700].astype("<i2").tobytes())
    whole = decoder.samples()
    for point in (0, 1, 699, 700, 701, 3500, 5999, 6000, 7000):
        assert np.array_equal(decoder.samples_since(point), whole[point:]), point
    decoder.feed(everything[:10].astype("<i2").tobytes())   # parts merged, then one more
    assert np.array_equal(decoder.samples_since(5995), decoder.samples()[5995:])
    decoder.close()


def test_the_last_pause_followed_by_speech_is_where_a_segment_ends():
    rate = audio_limits.SAMPLE_RATE
    speech = (0.1 * np.sin(np.arange(rate) * 0.3)).astype(np.float32)          # 1 s of sound
    quiet = np.zeros(int(0.4 * rate), np.float32)
    clip = np.concatenate([speech, quiet, speech, quiet, speech])
    pause = audio.last_pause(clip)
    assert pause is not None and abs(pause / rate - 2.6) < 0.05               # the middle of the second
    assert audio.last_pause(clip, not_before=int(2.5 * rate)) is None          # it begins too early
    assert audio.last_pause(np.concatenate([speech, quiet])) is None           # nothing said after it
    assert audio.last_pause(np.concatenate([speech, quiet, speech[:1600]])) is None   # a click after it
    short = np.zeros(int(0.15 * rate), np.float32)                             # a breath inside a phrase
    assert audio.last_pause(np.concatenate([speech, short, speech])) is None
