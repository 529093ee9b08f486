"""Speech synthesis (`/api/v1/tts`, its voices and status): text without markup, spoken by the
voice asked for or the language's default voice."""
from __future__ import annotations

import re

from aiohttp import web

from gateway.errors import ApiError, BadRequest
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body

from . import audio
from .engines import EngineFailed
from .engines.registry import guess_language
from .recognition import SERVICE
from .schemas import TtsRequest, TtsStatus, VoiceList

routes = web.RouteTableDef()

MARKUP = [(re.compile(r"```.*?(```|$)", re.S), " "), (re.compile(r"`([^`]*)`"), r"\1"),
          (re.compile(r"!\[[^\]]*\]\([^)]*\)"), " "), (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),
          (re.compile(r"https?://\S+"), " "), (re.compile(r"^\s{0,3}(#{1,6}|>|[-*+]|\d+\.)\s+", re.M), ""),
          (re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1"), r"\2"), (re.compile(r"[#*_~|<>]+"), " "),
          (re.compile(r"\s+"), " ")]


def speakable(text: str) -> str:
    """Text without markdown marks, code or links: read aloud, they would be noise."""
    for pattern, replacement in MARKUP:
        text = pattern.sub(replacement, text)
    return text.strip()


@routes.post("/api/v1/tts", name="voice.tts")
@api_doc("Speak a text: the audio (WAV by default, MP3 or OGG/Opus) with its length in a header",
         body=TtsRequest, responses={200: {"audio/wav": None, "audio/mpeg": None, "audio/ogg": None}},
         errors=(400, 422, 502, 503), response_headers={"X-Audio-Duration-Ms": "Length of the audio",
                                                        "X-Voice": "The voice id that spoke"},
         description="400 `text_too_long`, `nothing_to_say` (only markup), `unknown_voice`; 422 "
                     "`language_unsupported` when no voice speaks the language.")
async def tts(request: web.Request) -> web.Response:
    await require_user(request)
    service = request.config_dict[SERVICE]
    body = await parse_body(request, TtsRequest())
    if len(body["text"]) > service.settings.max_tts_chars:
        raise BadRequest(f"The text is longer than {service.settings.max_tts_chars} characters.",
                         error_type="text_too_long", hint="Split it into sentences and speak each.")
    text = speakable(body["text"])
    if not text:
        raise BadRequest("The text has nothing to say once markup and code are left out.",
                         error_type="nothing_to_say", hint="Send words.")
    engines = service.engines
    voices = {voice.id: voice for voice in engines.voices()}
    language = body.get("language") or "auto"
    if body.get("voice"):
        voice = voices.get(body["voice"])
        if voice is None:
            raise BadRequest(f"Unknown voice {body['voice']!r}.", error_type="unknown_voice",
                             hint="GET /api/v1/tts/voices lists the voices.")
    else:
        if language == "auto":
            language = guess_language(text)
        found = engines.voice_for(language)
        if found is None:
            raise ApiError(f"No voice of this service speaks the language {language!r}.",
                           error_type="language_unsupported", status=422,
                           hint="GET /api/v1/tts/status lists the languages spoken.")
        voice = found
    try:
        speech = await engines.synthesizer_of(voice).synthesize(text, voice, body["speed"])
    except EngineFailed as error:
        raise ApiError(f"The {voice.engine} engine failed: {error}", error_type=error.error_type,
                       status=error.status, hint="Try again, or another voice.") from None
    data = await service.run(audio.encode, speech.samples, speech.sample_rate, body["format"])
    duration_ms = int(len(speech.samples) * 1000 / speech.sample_rate) if speech.sample_rate else 0
    return web.Response(body=data, content_type=audio.ENCODINGS[body["format"]],
                        headers={"X-Audio-Duration-Ms": str(duration_ms), "X-Voice": voice.id})


@routes.get("/api/v1/tts/voices", name="voice.tts_voices")
@api_doc("The voices speech is synthesised with", responses={200: VoiceList})
async def tts_voices(request: web.Request) -> web.Response:
    await require_user(request)
    voices = request.config_dict[SERVICE].engines.voices()
    return web.json_response({"voices": [{"id": v.id, "name": v.name, "language": v.language, "engine": v.engine,
                                          "sample_rate": v.sample_rate} for v in voices], "count": len(voices)})


@routes.get("/api/v1/tts/status", name="voice.tts_status")
@api_doc("Synthesis engines, voices, default voice per language, and whether any voice is ready",
         responses={200: TtsStatus})
async def tts_status(request: web.Request) -> web.Response:
    await require_user(request)
    return web.json_response(request.config_dict[SERVICE].engines.tts_status())
