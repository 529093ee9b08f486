"""The one interface every speech engine meets, and how engines are found.

An engine is published in the entry-point group `gateway.voice_engines`: the entry point's
object is a factory `factory(settings: VoiceEngineSettings, http: EngineHttp) -> Iterable[engine]`
called once at the voice service's start with `[plugins.voice_engines]` (its attributes); each engine it yields is a
`SpeechRecognizer` or a `SpeechSynthesizer` (or both). The entry-point name is the name the
settings' `stt_engines` / `tts_engines` pick it by. The built-in engines (whisper, pocketsphinx,
piper, espeak, openai) are published the same way, so a third-party engine is no different
(docs/voice.md, "Adding an engine")."""
from __future__ import annotations

import importlib.metadata
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from ..settings import VoiceEngineSettings

log = logging.getLogger("voice.engines")

ENTRY_POINT_GROUP = "gateway.voice_engines"
SAMPLE_RATE = 16000


class EngineFailed(Exception):
    """An engine could not do what was asked (its model missing, a provider refusing); the
    service answers it as a clear error naming the engine, never as invented text."""

    def __init__(self, message: str, *, error_type: str = "engine_failed", status: int = 502):
        super().__init__(message)
        self.error_type, self.status = error_type, status


class PassAbandoned(Exception):
    """A recognition given up because its result is no longer wanted (a stream's
    interim once the stream stopped): the CPU goes to the pass that is."""


@dataclass(frozen=True)
class Recognition:
    text: str
    language: str      # the language recognised (detected, or the one asked for)


@runtime_checkable
class SpeechRecognizer(Protocol):
    name: str
    model: str                  # what it recognises with (shown in the status)
    languages: tuple[str, ...]  # ISO 639-1 codes it recognises
    detects_language: bool      # can it tell the language itself (language=auto)?
    loaded: bool

    async def load(self) -> None:
        """Load the model (off the event loop); raise EngineFailed when it cannot run here."""

    async def recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        """Text of 16 kHz mono float32 `samples`; `language` None asks the engine to detect it."""


@dataclass(frozen=True)
class Voice:
    id: str            # "<engine>:<voice>"
    name: str
    language: str
    engine: str
    sample_rate: int


@dataclass(frozen=True)
class Speech:
    samples: np.ndarray   # mono float32 in [-1, 1]
    sample_rate: int


@runtime_checkable
class SpeechSynthesizer(Protocol):
    name: str
    loaded: bool

    async def load(self) -> None:
        """Load the voices (off the event loop); raise EngineFailed when it cannot run here."""

    def voices(self) -> list[Voice]:
        """The voices it speaks with once loaded."""

    async def synthesize(self, text: str, voice: Voice, speed: float) -> Speech:
        """Speak `text` with `voice`; speed 1.0 is the voice's own pace, 2.0 twice as fast."""


class EngineHttp(Protocol):
    """What a network engine gets from the service: its one HTTP session."""

    @property
    def http(self) -> Any: ...


EngineFactory = Callable[["VoiceEngineSettings", EngineHttp], Iterable[Any]]


def engine_factories() -> dict[str, EngineFactory]:
    """Every factory installed in the entry-point group, by name; one that does not import is
    logged and left out (the service starts, and says in its status which engines run)."""
    factories: dict[str, EngineFactory] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name in factories:
            continue
        try:
            factories[entry_point.name] = entry_point.load()
        except Exception as error:  # noqa: BLE001 - a broken third-party engine must not stop the service
            log.warning("voice engine %s cannot be imported: %s", entry_point.name, error)
    return factories
