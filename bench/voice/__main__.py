"""Speech engines side by side on real recordings of people (bench/voice/recordings, shipped in
PyPI packages: see its SOURCES.md): word error rate (English), character error rate (Chinese)
and real-time factor of each recognizer, speech-synthesis time per sentence, and the voice
service's final-after-stop latency for utterances streamed in 100 ms chunks (stopped at once,
cut mid-speech, after a pause, a 24.7 s dictation, with and without `stream_segments`), and
(with --stream-accuracy) the error rates of streamed finals.

    .venv/bin/python -m bench.voice [--runs 3] [--skip-stream | --stream-only] [--stream-accuracy]

Prints a Markdown table; bench/README.md keeps the last one."""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from plugins.voice import audio, audio_limits, resampling  # noqa: E402
from plugins.voice.engines import Recognition  # noqa: E402
from plugins.voice.engines.espeak import EspeakSynthesizer  # noqa: E402
from plugins.voice.engines.piper import PiperSynthesizer  # noqa: E402
from plugins.voice.engines.pocketsphinx import PocketSphinxRecognizer  # noqa: E402
from plugins.voice.engines.whisper import WhisperRecognizer  # noqa: E402
from bench.voice.scoring import edit_distance  # noqa: E402

RECORDINGS = Path(__file__).resolve().parent / "recordings"
SENTENCES = {"en": ["Good morning, the living room light is now on.",
                    "Your meeting with Anna starts at three o'clock this afternoon.",
                    "It is twenty-one degrees and sunny in Berlin."],
             "zh": ["早上好，客厅的灯已经打开了。", "你下午三点和安娜开会。", "北京今天晴，气温二十一度。"]}
NUMBERS_EN = {str(n): word for n, word in enumerate(
    "zero one two three four five six seven eight nine ten".split())}
NUMBERS_ZH = dict(zip("0123456789", "零一二三四五六七八九"))


def recordings() -> list[tuple[Path, str, str]]:
    """(wav, language, reference text) of every recording with a transcript."""
    found = []
    for wav in sorted(RECORDINGS.glob("*.wav")):
        reference = wav.with_suffix(".txt").read_text(encoding="utf-8").strip()
        language = "zh" if "-zh-" in wav.name else "en"
        found.append((wav, language, reference))
    return found


def english_words(text: str) -> list[str]:
    text = re.sub(r"[^a-z0-9' ]", " ", text.lower().replace("-", " "))
    return [NUMBERS_EN.get(word, word) for word in text.split()]


def chinese_characters(text: str) -> list[str]:
    return [NUMBERS_ZH.get(c, c) for c in text if c.isalnum() and not c.isascii() or c.isdigit()]



class FittedWindow:
    """The Whisper engine's fitted-window pass (a stream's interims and final) as a recognizer."""

    def __init__(self, whisper: WhisperRecognizer):
        self.whisper, self.languages = whisper, whisper.languages

    async def load(self) -> None:
        await self.whisper.load()

    async def recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        assert language is not None
        return await self.whisper.recognize_fitted(samples, language)


async def recognition(runs: int) -> list[dict]:
    whisper_engine = WhisperRecognizer(2, 1, 1)
    engines: list[tuple[str, Any, bool]] = [("whisper base int8 (language given)", whisper_engine, True),
               ("whisper base int8, window fitted to the audio (streams)", FittedWindow(whisper_engine), True),
               ("whisper base int8 (language=auto)", None, False),
               ("pocketsphinx en-us (baseline)", PocketSphinxRecognizer(), True)]
    whisper = engines[0][1]
    assert whisper is not None
    rows = []
    for label, engine, given in engines:
        engine = engine or whisper
        await engine.load()
        totals = {"en": [0, 0], "zh": [0, 0]}
        seconds, processing, clips = 0.0, 0.0, 0
        for wav, language, reference in recordings():
            if language not in engine.languages:
                continue
            samples = audio.decode(wav.read_bytes())
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                result = await engine.recognize(samples, language if given else None)
                times.append(time.perf_counter() - started)
            seconds += len(samples) / audio_limits.SAMPLE_RATE
            processing += statistics.median(times)
            clips += 1
            if language == "en":
                ref, hyp = english_words(reference), english_words(result.text)
            else:
                ref, hyp = chinese_characters(reference), chinese_characters(result.text)
            totals[language][0] += edit_distance(ref, hyp)
            totals[language][1] += len(ref)
            print(f"  {label} | {wav.name} | {result.language} | {result.text!r}")
        rows.append({"engine": label, "clips": clips, "audio_s": seconds,
                     "wer_en": totals["en"][0] / totals["en"][1] if totals["en"][1] else None,
                     "cer_zh": totals["zh"][0] / totals["zh"][1] if totals["zh"][1] else None,
                     "rtf": processing / seconds if seconds else None})
    return rows


async def synthesis(runs: int) -> list[dict]:
    """Time per sentence, and how well Whisper recognises the speech back (a rough, automatic
    stand-in for intelligibility: word errors in English, character errors in Mandarin)."""
    listener = WhisperRecognizer(2, 1, 1)
    await listener.load()
    rows = []
    for label, engine, voice_id, language in (("piper en_US-joe-medium", PiperSynthesizer(), "piper:en_US-joe-medium", "en"),
                                              ("espeak-ng cmn-latn-pinyin", EspeakSynthesizer(),
                                               "espeak:cmn-latn-pinyin", "zh"),
                                              ("espeak-ng en-us", EspeakSynthesizer(), "espeak:en-us", "en")):
        try:
            await engine.load()
        except Exception as error:  # noqa: BLE001 - a missing engine is reported, not fatal
            rows.append({"voice": label, "error": str(error)})
            continue
        voice = next(v for v in engine.voices() if v.id == voice_id)
        times, lengths, edits, reference_units = [], [], 0, 0
        for sentence in SENTENCES[language]:
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                speech = await engine.synthesize(sentence, voice, 1.0)
                samples.append(time.perf_counter() - started)
            times.append(statistics.median(samples))
            lengths.append(len(speech.samples) / speech.sample_rate)
            heard = await listener.recognize(resampling.resample(speech.samples, speech.sample_rate, audio_limits.SAMPLE_RATE),
                                             language)
            units = english_words if language == "en" else chinese_characters
            edits += edit_distance(units(sentence), units(heard.text))
            reference_units += len(units(sentence))
            print(f"  {label} | {sentence} -> {heard.text!r}")
        rows.append({"voice": label, "per_sentence_ms": 1000 * statistics.mean(times),
                     "audio_s": statistics.mean(lengths), "rtf": sum(times) / sum(lengths),
                     "heard_error": edits / reference_units})
    return rows


LIBRIVOX = sorted(RECORDINGS.glob("sense_and_sensibility_*.wav"))
# (label, clips joined, first seconds kept (None: all), silence after): the latency runs, on the
# service's default settings; SEGMENTED ones with `stream_segments` on.
STREAMS = [("2.99 s of speech, stop at once", LIBRIVOX[1:2], None, 0.0),
           ("the first 3.3 s of a 7.1 s sentence: cut mid-speech", LIBRIVOX[:1], 3.3, 0.0),
           ("2.99 s of speech + 1.0 s of silence, then stop", LIBRIVOX[1:2], None, 1.0),
           ("24.7 s dictation (five sentences), cut mid-speech in the last, 23.5 s in", LIBRIVOX, 23.5, 0.0)]
SEGMENTED = [("the same dictation, `stream_segments` on", LIBRIVOX, 23.5, 0.0)]


class StreamingService:
    """The real voice-service app on a loopback port, and a client streaming to it at the pace
    of speech: 16 kHz pcm in 100 ms chunks, 100 ms apart, then stop."""

    def __init__(self, **settings: Any):
        self.settings = settings

    async def __aenter__(self) -> "StreamingService":
        import aiohttp
        from aiohttp import web

        from gateway.app import create_app
        from gateway.config import Config
        from plugins.auth import tokens_plugin
        from plugins.voice.service import plugin as voice_plugin

        from bench.support import free_port

        self.data_dir = tempfile.TemporaryDirectory()
        config = Config.load(overrides={
            "core.data_dir": self.data_dir.name, "auth.jwt_secret": "bench-secret-" + "x" * 32,
            "auth.service_token": "bench-service-token", "auth.admin_password": "bench-admin-password",
            "plugins": {"voice_engines": {"stt_engines": ["whisper"], "tts_engines": [], **self.settings}}},
            environ={})
        app = create_app("voice-service", config, plugins=[tokens_plugin, voice_plugin])
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        self.port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
        self.http = aiohttp.ClientSession(headers={"Authorization": "Bearer bench-service-token"})
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.http.close()
        await self.runner.cleanup()
        self.data_dir.cleanup()

    async def stream(self, samples: np.ndarray, language: str) -> tuple[float, dict, int]:
        """Seconds from stop to the final frame, the final frame, and the interims seen."""
        pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
        url = (f"http://127.0.0.1:{self.port}/api/v1/transcribe/stream"
               f"?language={language}&format=pcm&user_id=bench")
        async with self.http.ws_connect(url) as socket:
            await socket.receive_json()
            count = 0
            final: asyncio.Future = asyncio.get_running_loop().create_future()

            async def read_interims() -> None:
                nonlocal count
                async for message in socket:
                    frame = message.json()
                    if frame["type"] == "interim":
                        count += 1
                    else:
                        final.set_result(frame)
                        return
            reader = asyncio.ensure_future(read_interims())
            for start in range(0, len(pcm), 3200):
                await socket.send_bytes(pcm[start:start + 3200])
                await asyncio.sleep(0.1)
            stopped = time.perf_counter()
            await socket.send_json({"type": "stop"})
            frame = await final
            latency = time.perf_counter() - stopped
            await reader
        return latency, frame, count


async def stream_latency(service: StreamingService, runs: int, label: str, clips: list[Path],
                         cut_seconds: float | None, trailing_silence: float) -> dict:
    """`clips` joined (their first `cut_seconds` when given), `trailing_silence` seconds of
    silence after (a person stops speaking, then stops the recording), streamed `runs` times:
    time from stop to the final frame, the final's own `processing_ms` (the service's time from
    stop to its text) and `recognised_ms` (the audio recognised after stop)."""
    samples = np.concatenate([audio.decode(clip.read_bytes()) for clip in clips])
    if cut_seconds is not None:
        samples = samples[:int(cut_seconds * audio_limits.SAMPLE_RATE)]
    samples = np.concatenate([samples, np.zeros(int(trailing_silence * audio_limits.SAMPLE_RATE), np.float32)])
    latencies, interims, processing, recognised, texts = [], [], [], [], []
    for _ in range(runs):
        latency, frame, count = await service.stream(samples, "en")
        latencies.append(latency)
        processing.append(frame.get("processing_ms", float("nan")))
        recognised.append(frame.get("recognised_ms", float("nan")))
        texts.append(frame.get("text", ""))
        interims.append(count)
    print(f"  stream | {label} | finals: {sorted(set(texts))!r}")
    ordered = sorted(latencies)
    return {"label": label, "median_ms": 1000 * statistics.median(latencies), "min_ms": 1000 * ordered[0],
            "p90_ms": 1000 * ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))],
            "max_ms": 1000 * ordered[-1], "processing_ms": statistics.median(processing),
            "recognised_s": statistics.median(recognised) / 1000, "interims": statistics.mean(interims),
            "audio_s": len(samples) / audio_limits.SAMPLE_RATE}


async def stream_accuracy(service: StreamingService) -> dict:
    """Every recording streamed whole (and the five LibriVox sentences as one 24.7 s dictation):
    the error rates of the finals, scored as the recognizers' rows are."""
    totals = {"en": [0, 0], "zh": [0, 0]}
    joined = (np.concatenate([audio.decode(clip.read_bytes()) for clip in LIBRIVOX]), "en",
              " ".join(clip.with_suffix(".txt").read_text(encoding="utf-8").strip() for clip in LIBRIVOX))
    for samples, language, reference in [(audio.decode(wav.read_bytes()), language, reference)
                                         for wav, language, reference in recordings()] + [joined]:
        _, frame, _ = await service.stream(samples, language)
        words = english_words if language == "en" else chinese_characters
        totals[language][0] += edit_distance(words(reference), words(frame["text"]))
        totals[language][1] += len(words(reference))
        print(f"  streamed | {len(samples) / audio_limits.SAMPLE_RATE:.1f} s | {frame['text']!r}")
    return {"wer_en": totals["en"][0] / totals["en"][1], "cer_zh": totals["zh"][0] / totals["zh"][1]}


def fmt(value: float | None, pattern: str = "{:.3f}") -> str:
    return "n/a" if value is None else pattern.format(value)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timings per clip and sentence (median taken)")
    parser.add_argument("--skip-stream", action="store_true")
    parser.add_argument("--stream-only", action="store_true")
    parser.add_argument("--tts-only", action="store_true")
    parser.add_argument("--stream-accuracy", action="store_true",
                        help="also stream every recording and score the finals (about 80 s)")
    options = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; recordings: {len(recordings())} ({RECORDINGS})")
    stt = [] if options.stream_only or options.tts_only else await recognition(options.runs)
    tts = [] if options.stream_only else await synthesis(options.runs)
    streams, streamed, segmented = [], None, None
    if not (options.skip_stream or options.tts_only):
        async with StreamingService() as service:
            await service.stream(audio.decode(LIBRIVOX[1].read_bytes())[:16000], "en")   # warm-up
            streams = [await stream_latency(service, options.runs, *variant)
                       for variant in STREAMS if options.runs]
            streamed = await stream_accuracy(service) if options.stream_accuracy else None
        async with StreamingService(stream_segments=True) as service:
            streams += [await stream_latency(service, options.runs, *variant)
                        for variant in SEGMENTED if options.runs]
            segmented = await stream_accuracy(service) if options.stream_accuracy else None
    baseline = stt[-1] if stt else {}
    if stt:
        print("\n| recognizer | clips | audio (s) | WER English | CER Chinese | real-time factor | WER vs pocketsphinx |"
              " RTF vs pocketsphinx |")
        print("|---|---|---|---|---|---|---|---|")
    for row in stt:
        wer_ratio = row["wer_en"] / baseline["wer_en"] if row["wer_en"] is not None and baseline["wer_en"] else None
        rtf_ratio = row["rtf"] / baseline["rtf"] if row["rtf"] and baseline["rtf"] else None
        print(f"| {row['engine']} | {row['clips']} | {row['audio_s']:.1f} | {fmt(row['wer_en'])} | "
              f"{fmt(row['cer_zh'])} | {fmt(row['rtf'])} | {fmt(wer_ratio, '{:.2f}x')} | {fmt(rtf_ratio, '{:.2f}x')} |")
    if tts:
        print("\n| voice | per sentence (ms) | audio per sentence (s) | real-time factor | "
              "Whisper hears it back: WER (en) / CER (zh) |")
        print("|---|---|---|---|---|")
    for row in tts:
        if "error" in row:
            print(f"| {row['voice']} | not available: {row['error']} | | |")
        else:
            print(f"| {row['voice']} | {row['per_sentence_ms']:.0f} | {row['audio_s']:.2f} | {row['rtf']:.3f} | "
                  f"{row['heard_error']:.3f} |")
    if streams:
        print(f"\n| stream (pcm, 100 ms chunks at speaking pace), {options.runs} runs | "
              "final after stop: median | "
              "min | p90 | max | the service's processing_ms, median | audio recognised after stop, median | "
              "interims |")
        print("|---|---|---|---|---|---|---|---|")
    for stream in streams:
        print(f"| {stream['label']} | {stream['median_ms']:.0f} ms | {stream['min_ms']:.0f} ms | "
              f"{stream['p90_ms']:.0f} ms | {stream['max_ms']:.0f} ms | {stream['processing_ms']:.0f} ms | "
              f"{stream['recognised_s']:.2f} s | {stream['interims']:.1f} |")
    if streamed and segmented:
        print(f"\nStreamed finals (every recording, and the 24.7 s dictation): WER English "
              f"{streamed['wer_en']:.3f}, CER Chinese {streamed['cer_zh']:.3f}; with `stream_segments` on: "
              f"{segmented['wer_en']:.3f}, {segmented['cer_zh']:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
