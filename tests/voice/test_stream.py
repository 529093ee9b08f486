"""The streaming recognition WebSocket: interims while audio arrives, the final after stop, and
every way a stream ends early (silence, size, length, bad audio, a client gone)."""
from __future__ import annotations

import asyncio
import threading

import aiohttp
import numpy as np

from plugins.voice import audio_limits, resampling
from plugins.voice.recognition import SERVICE as SERVICE_KEY
from tests.voice.conftest import ALICE, CHINESE, ENGLISH, RECORDINGS, character_error_rate, encoded, pcm16, \
    samples_of, word_error_rate

ENGLISH_TEXT = "he was not an ill disposed young man"
STREAM = "/api/v1/transcribe/stream"


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


async def ready(socket) -> dict:
    frame = await socket.receive_json(timeout=10)
    assert frame["type"] == "ready", frame
    return frame


async def frames_until_close(socket) -> list[dict]:
    frames = []
    async for message in socket:
        if message.type == aiohttp.WSMsgType.TEXT:
            frames.append(message.json())
    return frames


async def released(client) -> None:
    """The server freed the stream: no stream held, no decoding thread left."""
    service = client.server.app[SERVICE_KEY]
    for _ in range(100):
        threads = [t for t in threading.enumerate() if t.name.startswith("voice-decode")]
        if not service.streams and not threads:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"still held: {service.streams}, {threads}")


async def test_interims_arrive_while_chunks_keep_coming_then_the_final(make_voice_service):
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], interim_interval_seconds=0.5)
    webm = encoded(samples_of(ENGLISH), "webm", "libopus", 48000)
    pieces = chunks(webm, max(1, len(webm) // 30))       # ~100 ms of audio each
    async with client.ws_connect(f"{STREAM}?language=en&format=webm", headers=ALICE) as socket:
        assert (await ready(socket))["engine"] == "whisper"
        for piece in pieces[:20]:
            await socket.send_bytes(piece)
        # Two thirds sent and no stop: an interim comes while the stream is still open.
        interim = await socket.receive_json(timeout=30)
        assert interim["type"] == "interim" and interim["text"], interim
        for piece in pieces[20:]:
            await socket.send_bytes(piece)
        await socket.send_json({"type": "stop"})
        frames = await frames_until_close(socket)
    final = frames[-1]
    assert final["type"] == "final" and final["language"] == "en" and final["engine"] == "whisper"
    assert word_error_rate(ENGLISH_TEXT, final["text"]) <= 0.25, final
    assert 2900 <= final["duration_ms"] <= 3100
    assert all(frame["type"] == "interim" for frame in frames[:-1])
    await released(client)


async def test_a_chinese_pcm_stream(voice_service):
    pieces = chunks(pcm16(samples_of(CHINESE)), 3200)   # 100 ms of 16 kHz s16le
    async with voice_service.ws_connect(f"{STREAM}?language=zh&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        for piece in pieces:
            await socket.send_bytes(piece)
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and final["language"] == "zh"
    assert character_error_rate("你好世界", final["text"]) <= 0.5, final


async def test_a_wav_stream_and_an_ogg_stream(voice_service):
    original = samples_of(ENGLISH)
    for audio_format, data in (("wav", encoded(original, "wav", "pcm_s16le", 44100)),
                               ("ogg", encoded(original, "ogg", "libopus", 48000))):
        async with voice_service.ws_connect(f"{STREAM}?language=en&format={audio_format}", headers=ALICE) as socket:
            await ready(socket)
            for piece in chunks(data, 2000):
                await socket.send_bytes(piece)
            await socket.send_json({"type": "stop"})
            final = (await frames_until_close(socket))[-1]
        assert word_error_rate(ENGLISH_TEXT, final["text"]) <= 0.25, (audio_format, final)


async def test_a_silent_stream_ends_with_an_empty_final(voice_service):
    async with voice_service.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        await socket.send_bytes(pcm16(np.zeros(audio_limits.SAMPLE_RATE, np.float32)))
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and final["text"] == ""


async def test_a_stream_that_goes_quiet_is_closed(make_voice_service):
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], stream_idle_seconds=0.3)
    async with client.ws_connect(f"{STREAM}?language=en&format=webm", headers=ALICE) as socket:
        await ready(socket)
        frames = await frames_until_close(socket)
    assert frames == [{"type": "error", "error": frames[0]["error"], "errorType": "stream_timeout"}]
    await released(client)


async def test_over_size_and_over_length_streams_are_closed(make_voice_service):
    data = pcm16(samples_of(ENGLISH))
    for settings, error_type in (({"max_audio_bytes": 20_000}, "audio_too_large"),
                                 ({"max_audio_seconds": 1.0}, "audio_too_long")):
        client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], **settings)
        async with client.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
            await ready(socket)
            for piece in chunks(data, 3200):
                if socket.closed:
                    break
                await socket.send_bytes(piece)
            frames = await frames_until_close(socket)
        assert frames[-1]["type"] == "error" and frames[-1]["errorType"] == error_type, frames
        await released(client)


async def test_undecodable_stream_audio_is_an_error(voice_service):
    async with voice_service.ws_connect(f"{STREAM}?language=en&format=webm", headers=ALICE) as socket:
        await ready(socket)
        for _ in range(40):
            if socket.closed:
                break
            await socket.send_bytes(b"definitely not a webm file " * 100)
            await asyncio.sleep(0.02)
        if not socket.closed:
            await socket.send_json({"type": "stop"})
        frames = await frames_until_close(socket)
    assert frames[-1]["type"] == "error" and frames[-1]["errorType"] == "audio_undecodable", frames
    await released(voice_service)


async def test_a_client_that_drops_mid_stream_frees_its_recognizer(voice_service):
    webm = encoded(samples_of(ENGLISH), "webm", "libopus", 48000)
    socket = await voice_service.ws_connect(f"{STREAM}?language=en&format=webm", headers=ALICE)
    await ready(socket)
    for piece in chunks(webm, 1000)[:10]:
        await socket.send_bytes(piece)
    assert voice_service.server.app[SERVICE_KEY].streams
    await socket.close()
    await released(voice_service)


async def test_bad_parameters_are_an_error_frame(make_voice_service):
    client = await make_voice_service(stt_engines=["pocketsphinx"], tts_engines=[])
    for query, error_type in (("language=en&format=aiff", "validation_error"),
                              ("language=xx", "validation_error"),
                              ("language=zh&format=pcm", "language_unsupported")):
        async with client.ws_connect(f"{STREAM}?{query}", headers=ALICE) as socket:
            frames = await frames_until_close(socket)
        assert frames[0]["type"] == "error" and frames[0]["errorType"] == error_type, (query, frames)


async def test_a_text_frame_other_than_stop_is_answered_and_the_stream_goes_on(voice_service):
    async with voice_service.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        await socket.send_str("hello")
        error = await socket.receive_json(timeout=5)
        assert error["type"] == "error" and error["errorType"] == "invalid_message"
        await socket.send_bytes(pcm16(samples_of(ENGLISH)))
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and final["text"]


async def test_the_stream_needs_a_credential_and_an_upgrade(voice_service):
    response = await voice_service.get(f"{STREAM}?language=en")
    assert response.status == 401
    response = await voice_service.get(f"{STREAM}?language=en", headers=ALICE)
    assert response.status == 400 and (await response.json())["errorType"] == "websocket_required"


async def test_auto_detects_the_language_once_and_keeps_it(make_voice_service):
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], interim_interval_seconds=1.5,
                                      default_language="zh")
    pieces = chunks(pcm16(samples_of(ENGLISH)), 3200)
    async with client.ws_connect(f"{STREAM}?language=auto&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        for piece in pieces[:20]:
            await socket.send_bytes(piece)
        interim = await socket.receive_json(timeout=30)   # on 2 s of English: detected, not the default zh
        assert interim["type"] == "interim" and any(c.isascii() and c.isalpha() for c in interim["text"]), interim
        for piece in pieces[20:]:
            await socket.send_bytes(piece)
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["language"] == "en" and word_error_rate(ENGLISH_TEXT, final["text"]) <= 0.25, final


async def test_the_final_is_the_interim_when_only_silence_followed(make_voice_service, caplog):
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], interim_interval_seconds=0.5)
    speech = pcm16(samples_of(ENGLISH))
    async with client.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        await socket.send_bytes(speech)
        interims = []
        while not interims or interims[-1]["text"].count(" ") < 5:   # an interim over the whole utterance
            interims.append(await socket.receive_json(timeout=30))
        await socket.send_bytes(bytes(12800))   # 0.4 s of silence (under the interval), then stop
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and final["text"] == interims[-1]["text"]
    assert final["duration_ms"] == 2990 + 400


async def test_a_pcm_stream_at_its_own_sample_rate(voice_service):
    at_8k = resampling.resample(samples_of(ENGLISH), 16000, 8000)
    async with voice_service.ws_connect(f"{STREAM}?language=en&format=pcm&sample_rate=8000", headers=ALICE) as socket:
        await ready(socket)
        for piece in chunks(pcm16(at_8k), 1601):   # odd sizes: a sample split across two frames
            await socket.send_bytes(piece)
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["duration_ms"] == 2990 and word_error_rate(ENGLISH_TEXT, final["text"]) <= 0.35, final


async def test_a_stream_stopped_mid_speech_is_recognised_whole(make_voice_service):
    # The last words arrive with stop, after every interim: the final is one more pass (Whisper's
    # fitted window), and it still hears the whole utterance.
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], interim_interval_seconds=0.3)
    speech = pcm16(samples_of(ENGLISH))
    async with client.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        await socket.send_bytes(speech[:len(speech) // 2])
        interim = await socket.receive_json(timeout=30)
        assert interim["type"] == "interim", interim
        await socket.send_bytes(speech[len(speech) // 2:])
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and word_error_rate(ENGLISH_TEXT, final["text"]) <= 0.25, final
    assert final["duration_ms"] == 2990
    await released(client)


async def test_an_engine_without_a_fitted_pass_recognises_streams_as_usual(make_voice_service):
    # `recognize_fitted` is Whisper's own: a third-party engine streams through `recognize`.
    client = await make_voice_service(stt_engines=["whisper", "seconds_counter"], tts_engines=[],
                                      stt_language_engines={"ja": "seconds_counter"})
    async with client.ws_connect(f"{STREAM}?language=ja&format=pcm", headers=ALICE) as socket:
        assert (await ready(socket))["engine"] == "seconds_counter"
        for piece in chunks(pcm16(samples_of(ENGLISH)), 3200):
            await socket.send_bytes(piece)
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final == {**final, "type": "final", "text": "3.0 秒", "engine": "seconds_counter", "language": "ja"}


async def test_a_paused_stream_is_recognised_whole_without_segments(make_voice_service):
    # `stream_segments` is off by default: the same two sentences, and the final recognises it all.
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], interim_interval_seconds=0.3)
    pause = np.zeros(int(0.6 * audio_limits.SAMPLE_RATE), np.float32)
    speech = np.concatenate([samples_of(ENGLISH), pause, samples_of(ENGLISH)])
    async with client.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        await socket.send_bytes(pcm16(speech))
        assert (await socket.receive_json(timeout=30))["type"] == "interim"
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and final["recognised_ms"] in (0, final["duration_ms"]), final


async def test_after_a_pause_the_final_recognises_only_the_audio_past_the_kept_segment(make_voice_service):
    # Two sentences with a pause between them, in one frame: the first pass sees the pause and
    # recognises the audio up to it once (a segment, kept); stop comes while the second sentence
    # is unrecognised, and the final recognises only what follows the pause, joined to the first.
    client = await make_voice_service(stt_engines=["whisper"], tts_engines=[], interim_interval_seconds=0.3,
                                      stream_segments=True)
    second = RECORDINGS / "sense_and_sensibility_01_austen_64kb-0930.wav"    # "he might even have been ..."
    pause = np.zeros(int(0.6 * audio_limits.SAMPLE_RATE), np.float32)
    speech = np.concatenate([samples_of(ENGLISH), pause, samples_of(second)])
    async with client.ws_connect(f"{STREAM}?language=en&format=pcm", headers=ALICE) as socket:
        await ready(socket)
        await socket.send_bytes(pcm16(speech))
        segment = await socket.receive_json(timeout=30)
        assert segment["type"] == "interim", segment
        assert word_error_rate(ENGLISH_TEXT, segment["text"]) <= 0.25, segment
        await socket.send_json({"type": "stop"})
        final = (await frames_until_close(socket))[-1]
    assert final["type"] == "final" and final["text"].startswith(segment["text"] + " "), (segment, final)
    said = ENGLISH_TEXT + " " + second.with_suffix(".txt").read_text(encoding="utf-8")
    assert word_error_rate(said, final["text"]) <= 0.25, final
    assert final["duration_ms"] == len(speech) * 1000 // audio_limits.SAMPLE_RATE
    # Only the tail: past the first sentence and half the pause, the second sentence.
    assert 3290 <= final["recognised_ms"] <= final["duration_ms"] - 2990, final
    await released(client)
