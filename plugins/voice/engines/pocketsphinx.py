"""CMU PocketSphinx with its wheel's default US-English model: the baseline the bench measures
Whisper against, and an English engine an operator may pick (it is light and fast, but
recognises free speech poorly: bench/README.md)."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Iterable

import numpy as np

from . import EngineFailed, EngineHttp, Recognition


class PocketSphinxRecognizer:
    name = "pocketsphinx"
    model = "pocketsphinx en-us (cmusphinx-en-us-ptm-5.2 + en-us.lm)"
    languages = ("en",)
    detects_language = False

    def __init__(self) -> None:
        self.loaded = False
        self._decoders: list[Any] = []   # a decoder is not thread-safe: one per recognition at a time
        self._lock = threading.Lock()

    async def load(self) -> None:
        decoder = await asyncio.get_running_loop().run_in_executor(None, self._new_decoder)
        self._decoders.append(decoder)
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
        with self._lock:
            decoder = self._decoders.pop() if self._decoders else self._new_decoder()
        try:
            pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            hypothesis = decoder.hyp()
            return Recognition(text=hypothesis.hypstr.strip() if hypothesis else "", language="en")
        finally:
            with self._lock:
                self._decoders.append(decoder)


def factory(settings: dict, http: EngineHttp) -> Iterable[Any]:
    return [PocketSphinxRecognizer()]
