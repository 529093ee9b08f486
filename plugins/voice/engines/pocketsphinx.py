"""CMU PocketSphinx with its wheel's default US-English model: the baseline the bench measures
Whisper against, and an English engine an operator may pick (it is light and fast, but
recognises free speech poorly: bench/README.md)."""
from __future__ import annotations

import asyncio
import importlib.util
import threading
from typing import Any, Iterable

import numpy as np

from gateway.idle import IdleModel
from . import EngineFailed, EngineHttp, Recognition
from ..settings import VoiceEngineSettings


class PocketSphinxRecognizer:
    name = "pocketsphinx"
    model = "pocketsphinx en-us (cmusphinx-en-us-ptm-5.2 + en-us.lm)"
    languages = ("en",)
    detects_language = False

    def __init__(self) -> None:
        self.loaded = False   # ready to recognise; the decoders are made on first use
        # A decoder is not thread-safe: one per recognition at a time, all dropped when idle.
        self._decoders: IdleModel[list[Any]] = IdleModel("PocketSphinx en-us", list)
        self._lock = threading.Lock()

    @property
    def model_loaded(self) -> bool:
        return self._decoders.loaded

    async def load(self) -> None:
        if importlib.util.find_spec("pocketsphinx") is None:
            raise EngineFailed("PocketSphinx is not installed.", error_type="engine_unavailable", status=503)
        self.loaded = True

    @staticmethod
    def _new_decoder() -> Any:
        try:
            from pocketsphinx import Decoder
        except ImportError as error:
            raise EngineFailed(f"PocketSphinx is not installed: {error}", error_type="engine_unavailable",
                               status=503) from None
        return Decoder(loglevel="FATAL")

    async def recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        return await asyncio.get_running_loop().run_in_executor(None, self._recognize, samples)

    def _recognize(self, samples: np.ndarray) -> Recognition:
        with self._decoders.using() as decoders:
            return self._decode(decoders, samples)

    def _decode(self, decoders: list[Any], samples: np.ndarray) -> Recognition:
        with self._lock:
            decoder = decoders.pop() if decoders else None
        decoder = decoder or self._new_decoder()
        try:
            pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            hypothesis = decoder.hyp()
            return Recognition(text=hypothesis.hypstr.strip() if hypothesis else "", language="en")
        finally:
            with self._lock:
                decoders.append(decoder)


def factory(settings: VoiceEngineSettings, http: EngineHttp) -> Iterable[Any]:
    return [PocketSphinxRecognizer()]
