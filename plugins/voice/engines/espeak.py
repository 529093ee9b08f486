"""eSpeak NG from Debian (`apt-get install espeak-ng`, GPL-3.0): the only offline Mandarin voice
found in a registry package. Its `cmn-latn-pinyin` voice reads Chinese characters as Mandarin
(plain `cmn` reads tone digits aloud). Robotic but intelligible; it also speaks English, Japanese
and Korean as a fallback. Missing program: the engine is not loaded and the status says so."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
from typing import Any, Iterable

import numpy as np

from . import EngineFailed, EngineHttp, Speech, Voice
from ..settings import VoiceEngineSettings

VOICES = (("cmn-latn-pinyin", "zh", "Mandarin (eSpeak NG)"), ("en-us", "en", "English US (eSpeak NG)"),
          ("ja", "ja", "Japanese (eSpeak NG)"), ("ko", "ko", "Korean (eSpeak NG)"))
SAMPLE_RATE = 22050
WORDS_PER_MINUTE = 175   # eSpeak's own default pace, scaled by `speed`


class EspeakSynthesizer:
    name = "espeak"

    def __init__(self) -> None:
        self.loaded = False
        self.program: str | None = None

    async def load(self) -> None:
        self.program = shutil.which("espeak-ng")
        if self.program is None:
            raise EngineFailed("The espeak-ng program is not installed (Debian package `espeak-ng`).",
                               error_type="engine_unavailable", status=503)
        self.loaded = True

    def voices(self) -> list[Voice]:
        return [Voice(id=f"espeak:{name}", name=title, language=language, engine=self.name,
                      sample_rate=SAMPLE_RATE) for name, language, title in VOICES] if self.loaded else []

    async def synthesize(self, text: str, voice: Voice, speed: float) -> Speech:
        return await asyncio.get_running_loop().run_in_executor(None, self._synthesize, text, voice, speed)

    def _synthesize(self, text: str, voice: Voice, speed: float) -> Speech:
        assert self.program is not None
        espeak_voice = voice.id.split(":", 1)[1]
        # The text goes on stdin, never on the command line (a leading "-" is no option).
        done = subprocess.run([self.program, "-v", espeak_voice, "-s", str(int(WORDS_PER_MINUTE * speed)),
                               "--stdin", "--stdout"], input=text.encode(), capture_output=True, timeout=60)
        if done.returncode != 0 or not done.stdout:
            raise EngineFailed(f"espeak-ng failed: {done.stderr.decode(errors='replace')[:200]}")
        return wav_to_speech(done.stdout)


def wav_to_speech(data: bytes) -> Speech:
    """espeak-ng streams its WAV, so the header's sizes say "unknown" (0x7fffffff): read the
    rate from the canonical 44-byte header and every sample after it."""
    if len(data) < 44 or data[:4] != b"RIFF" or data[36:40] != b"data" or data[34:36] != b"\x10\x00":
        raise EngineFailed("espeak-ng wrote audio in an unexpected layout.")
    rate = int.from_bytes(data[24:28], "little")
    body = data[44:]
    samples = np.frombuffer(body[: len(body) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    return Speech(samples=samples, sample_rate=rate)


def factory(settings: VoiceEngineSettings, http: EngineHttp) -> Iterable[Any]:
    return [EspeakSynthesizer()]
