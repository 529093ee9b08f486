"""Any OpenAI-compatible speech provider (`/v1/audio/transcriptions`, `/v1/audio/speech`), when
the operator names one (`openai_base_url`). Audio goes to it as 16 kHz WAV; its speech comes
back as WAV and is re-encoded to what the caller asked for."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Iterable

import aiohttp
import numpy as np

from .. import audio
from . import SAMPLE_RATE, EngineFailed, EngineHttp, Recognition, Speech, Voice
from ..settings import VoiceEngineSettings


class OpenAiSpeech:
    """Both a recognizer and a synthesizer: one provider, one configuration."""
    name = "openai"
    detects_language = True

    def __init__(self, settings: VoiceEngineSettings, http: EngineHttp):
        self.base_url = settings.openai_base_url.rstrip("/")
        self.api_key = settings.openai_api_key or os.environ.get("VOICE_OPENAI_API_KEY", "")
        self.stt_model, self.tts_model = settings.openai_stt_model, settings.openai_tts_model
        self.model = f"{self.stt_model} at {self.base_url}"
        self.languages = tuple(settings.openai_languages)
        self.voice_names = list(settings.openai_voices)
        self.timeout = aiohttp.ClientTimeout(total=settings.openai_timeout)
        self._http = http
        self.loaded = False

    async def load(self) -> None:
        if not self.base_url:
            raise EngineFailed("No OpenAI-compatible provider is configured (openai_base_url).",
                               error_type="not_configured", status=503)
        self.loaded = True

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def recognize(self, samples: np.ndarray, language: str | None) -> Recognition:
        wav = await asyncio.get_running_loop().run_in_executor(None, audio.encode, samples, SAMPLE_RATE, "wav")
        form = aiohttp.FormData()
        form.add_field("file", wav, filename="audio.wav", content_type="audio/wav")
        form.add_field("model", self.stt_model)
        form.add_field("response_format", "verbose_json")
        if language:
            form.add_field("language", language)
        body = await self._call("/audio/transcriptions", data=form)
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise EngineFailed("The speech provider answered without a text.")
        detected = body.get("language") if isinstance(body.get("language"), str) else None
        return Recognition(text=body["text"].strip(), language=language or _iso(detected) or "")

    def voices(self) -> list[Voice]:
        return [Voice(id=f"openai:{name}", name=f"{name} ({self.tts_model})", language="*", engine=self.name,
                      sample_rate=24000) for name in self.voice_names] if self.loaded else []

    async def synthesize(self, text: str, voice: Voice, speed: float) -> Speech:
        body = await self._call("/audio/speech", json={"model": self.tts_model, "input": text,
                                                        "voice": voice.id.split(":", 1)[1],
                                                        "response_format": "wav", "speed": speed}, raw=True)
        assert isinstance(body, bytes)
        return await asyncio.get_running_loop().run_in_executor(None, _speech_of, body)

    async def _call(self, path: str, *, raw: bool = False, **kwargs: Any) -> Any:
        try:
            async with self._http.http.post(f"{self.base_url}{path}", headers=self._headers(),
                                            timeout=self.timeout, **kwargs) as response:
                if response.status >= 400:
                    detail = (await response.text())[:200]
                    raise EngineFailed(f"The speech provider answered {response.status}: {detail}")
                return await response.read() if raw else await response.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
            raise EngineFailed(f"The speech provider cannot be reached: {type(error).__name__} {error}") from None


LANGUAGE_NAMES = {"chinese": "zh", "english": "en", "japanese": "ja", "korean": "ko"}


def _iso(language: str | None) -> str | None:
    """OpenAI's verbose_json names the language in English words ("english")."""
    if not language:
        return None
    return LANGUAGE_NAMES.get(language.lower(), language.lower()[:2])


def _speech_of(data: bytes) -> Speech:
    import av
    import io
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            rate = container.streams.audio[0].rate
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            parts = [frame.to_ndarray().reshape(-1) for decoded in container.decode(audio=0)
                     for frame in resampler.resample(decoded)]
    except (av.FFmpegError, IndexError, ValueError) as error:
        raise EngineFailed(f"The speech provider's audio cannot be decoded: {error}") from None
    return Speech(samples=np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32),
                  sample_rate=rate)


def factory(settings: VoiceEngineSettings, http: EngineHttp) -> Iterable[Any]:
    return [OpenAiSpeech(settings, http)]
