"""The gateway plugin `voice` (docs/voice.md, "In the gateway"): the spec's `/api/v1/voice/...`
endpoints passed on to the voice service (voice_service_client.py), voice over the chat socket
(gateway_streams.py), spoken replies (spoken.py) and their audio (`/api/v1/voice/audio/...`)."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator

from aiohttp import BodyPartReader, web

from gateway.context import Context, get_context
from gateway.downloads import send_blob
from gateway.errors import ApiError, BadRequest, Forbidden, NotFound, Unauthorized
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar
from gateway.validation import each_multipart_part, parse_body, read_part
from plugins.auth.contract import keep_person_data
from plugins.chat.contract import REPLY_TAPS

from .voice_service_client import VoiceServiceClient, VoiceUnavailable, refused
from .gateway_schemas import (LANGUAGES, AudioQuery, SpeechBody, SpeechStatus, StreamSegmentsFrame, TranscribeForm,
                              Transcription, VoiceFinalFrame, VoiceInputFrame, VoiceInterimFrame,
                              VoiceList, VoiceStatus, VoiceStreamChunkFrame, VoiceStreamEndFrame, VoiceStreamStartFrame,
                              VoiceTranscriptFrame)
from .gateway_streams import VoiceStreams
from .audio_store import AUDIO_TYPES, AudioStore, owner_of
from .settings import MB, VoiceSettings
from .spoken import SPOKEN_MODES, SpokenReplies

CLIENT = web.AppKey("voice.client", VoiceServiceClient)
AUDIO = web.AppKey("voice.audio", AudioStore)
SETTINGS = web.AppKey("voice.settings", VoiceSettings)
SAFE_HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}

routes = web.RouteTableDef()


def client_of(request: web.Request) -> VoiceServiceClient:
    return request.config_dict[CLIENT]


async def read_limited(part: BodyPartReader, limit: int) -> bytes:
    return await read_part(part, limit, lambda: ApiError(
        f"The recording is larger than {limit // MB} MB.", error_type="file_too_large",
        hint="Send at most 10 MB, or stream it over /ws/chat.", status=413, extra={"success": False}))


def failure(error: ApiError) -> ApiError:
    """A transcription's failure carries `success: false` (spec)."""
    error.extra = {"success": False, **error.extra}
    return error


@routes.post("/api/v1/voice/transcribe", name="voice.transcribe")
@api_doc("Transcribe a recording (multipart field `audio`, up to 10 MB)", body=TranscribeForm,
         content_type="multipart/form-data",
         responses={200: Transcription}, errors=(413, 422, 502),
         description="A failure's error body also carries `success: false` (spec): 400 for a body "
                     "without audio or audio that cannot be decoded, 413 over the limit, 422 for a language no "
                     "engine recognises, 502 `voice_service_unreachable`.")
async def transcribe(request: web.Request) -> web.Response:
    identity = await require_user(request)
    limit = request.config_dict[SETTINGS].max_upload_bytes
    if not request.content_type.startswith("multipart/"):
        raise failure(BadRequest("Send the recording as multipart/form-data in the field `audio`.",
                                 error_type="validation_error"))
    audio: bytes | None = None
    filename, content_type = "audio", ""
    fields_: dict[str, str] = {}

    async def keep(part: BodyPartReader) -> None:
        nonlocal audio, filename, content_type
        if part.name == "audio" and audio is None:
            audio = await read_limited(part, limit)
            filename, content_type = part.filename or "audio", part.headers.get("Content-Type", "")
        elif part.name in ("language", "format"):
            fields_[part.name] = (await part.read_chunk(64)).decode("utf-8", "replace").strip()
        else:
            await part.release()

    try:
        await each_multipart_part(request, keep, lambda reason: failure(BadRequest(
            f"The multipart body cannot be read: {reason}", error_type="validation_error")))
    except ApiError as error:
        raise failure(error) from None
    if not audio:
        raise failure(BadRequest("The multipart body has no field `audio`, or it is empty.",
                                 error_type="validation_error", hint="Send the recording in the field `audio`."))
    language = fields_.get("language") or "auto"
    if language not in LANGUAGES:
        raise failure(BadRequest(f"language must be one of {', '.join(LANGUAGES)}.", error_type="validation_error"))
    try:
        answer = await client_of(request).transcribe(audio, user_id=identity.user_id, language=language,
                                                     audio_format=fields_.get("format"),
                                                     filename=filename, content_type=content_type or
                                                     "application/octet-stream")
    except ApiError as error:
        raise failure(error) from None
    body = answer.json() or {}
    if answer.status >= 400 or body.get("success") is False:
        status = answer.status if answer.status >= 400 else 400
        raise failure(refused(status, body))
    return web.json_response({**body, "success": True, "text": str(body.get("text") or "")})


@routes.post("/api/v1/voice/tts", name="voice.tts")
@api_doc("Speak a text (the voice service's synthesis): the audio itself", body=SpeechBody,
         responses={200: {"audio/wav": None, "audio/mpeg": None, "audio/ogg": None}}, errors=(422, 502),
         response_headers={"X-Audio-Duration-Ms": "The audio's length in milliseconds"})
async def tts(request: web.Request) -> web.Response:
    await require_user(request)
    body = await parse_body(request, SpeechBody())
    answer = await client_of(request).synthesize({key: value for key, value in body.items() if value is not None})
    if answer.status >= 400:
        raise refused(answer.status, answer.json() or {})
    headers = {**SAFE_HEADERS, "Cache-Control": "no-store"}
    if "X-Audio-Duration-Ms" in answer.headers:
        headers["X-Audio-Duration-Ms"] = answer.headers["X-Audio-Duration-Ms"]
    content_type = answer.content_type if answer.content_type.startswith("audio/") else \
        AUDIO_TYPES.get(body["format"], "application/octet-stream")
    return web.Response(body=answer.body, content_type=content_type, headers=headers)


@routes.get("/api/v1/voice/tts/voices", name="voice.tts_voices")
@api_doc("The voices speech can be synthesized in", responses={200: VoiceList}, errors=(502,))
async def tts_voices(request: web.Request) -> web.Response:
    await require_user(request)
    return web.json_response(await client_of(request).call("GET", "/api/v1/tts/voices"))


@routes.get("/api/v1/voice/tts/status", name="voice.tts_status")
@api_doc("Whether speech can be synthesized, with which engines and default voices",
         responses={200: SpeechStatus}, errors=(502,))
async def tts_status(request: web.Request) -> web.Response:
    await require_user(request)
    return web.json_response(await client_of(request).call("GET", "/api/v1/tts/status"))


@routes.get("/api/v1/voice/status", name="voice.status")
@api_doc("Recognition and synthesis together: engines, languages, voices, readiness",
         responses={200: VoiceStatus}, errors=(502,))
async def status(request: web.Request) -> web.Response:
    await require_user(request)
    client = client_of(request)
    overall, speech = await asyncio.gather(client.call("GET", "/api/v1/status"),
                                           client.call("GET", "/api/v1/tts/status"))
    return web.json_response({"available": True, "stt": overall.get("stt") or {}, "tts": overall.get("tts") or {},
                              "tts_status": speech})


@routes.get("/api/v1/voice/audio/{owner}/{name}", name="voice.audio")
@api_doc("A spoken reply's audio, whole or one byte range: its owner's, by token or by the signed link "
         "the frames carry", query=AudioQuery, auth="optional",
         responses={200: {"audio/wav": None, "audio/mpeg": None, "audio/ogg": None},
                    206: {"audio/wav": None, "audio/mpeg": None, "audio/ogg": None}},
         errors=(403, 404, 416, 503), headers={"Range": "One byte range, `bytes=<first>-<last>`"},
         response_headers={"Accept-Ranges": "`bytes`", "Content-Range": "206 only: the range sent"},
         path={"owner": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
               "name": {"type": "string", "pattern": "^[0-9a-f]{32}\\.(wav|mp3|ogg)$"}})
async def audio(request: web.Request) -> web.StreamResponse:
    owner, name = request.match_info["owner"], request.match_info["name"]
    store = request.config_dict[AUDIO]
    stem, _, extension = name.partition(".")
    if len(owner) != 32 or len(stem) != 32 or extension not in AUDIO_TYPES \
            or not all(c in "0123456789abcdef" for c in owner + stem):
        raise NotFound("No such audio.", error_type="audio_not_found")
    if "signature" in request.query:
        if not store.links.valid(f"{owner}/{name}", request.query):
            raise Unauthorized("The audio link is invalid or has expired.", error_type="invalid_signature",
                               hint="Fetch it with your bearer token instead.")
    else:
        identity = await require_user(request)
        if owner_of(identity.user_id) != owner:
            raise Forbidden("This audio belongs to someone else.", error_type="forbidden")
    key = store.key(owner, name)
    blobs = get_context(request).blobs
    size = await blobs.size(key)
    if size is None:
        raise NotFound("No such audio.", error_type="audio_not_found")
    return await send_blob(request, blobs, key, size, {
        **SAFE_HEADERS, "Content-Type": AUDIO_TYPES[extension], "Cache-Control": "private, max-age=3600"},
        missing=lambda: NotFound("No such audio.", error_type="audio_not_found"))


SERVER_FRAMES = {
    "voice_transcript": (VoiceTranscriptFrame, "What a `voice_input` recording said (to its device); a "
                                               "non-empty text then goes in as the user's message."),
    "voice_interim": (VoiceInterimFrame, "A streaming voice session's text so far (to its device); the first, "
                                         "empty, confirms `voice_stream_start`."),
    "voice_final": (VoiceFinalFrame, "A streaming voice session's final text after `voice_stream_end`; \"\" when "
                                     "no speech was recognised (then no turn)."),
    "stream_segments": (StreamSegmentsFrame, "A spoken reply's next sentence and its audio (modes `voice_msg`, "
                                             "`voice_assistant`), between stream_start and stream_end."),
}


class VoicePlugin(Plugin):
    name = "voice"
    depends = ("auth_tokens", "chat")
    uses = ("blobs", "database")
    description = "Voice endpoints, voice over the chat socket, spoken replies (through the voice service)"
    settings_class = VoiceSettings

    def setup(self, registrar: Registrar[VoiceSettings]) -> None:
        settings, context = registrar.settings, registrar.context
        client = VoiceServiceClient(context, timeout=settings.timeout, connect_timeout=settings.connect_timeout)
        audio_store = AudioStore(context, settings.audio_url_ttl, settings.audio_retention_days)
        streams = VoiceStreams(context, client, settings)
        registrar.routes(routes)
        registrar.migrations("plugins.voice")
        registrar.job("delete_old_reply_audio", audio_store.sweep)
        registrar.app_state(CLIENT, client)
        registrar.app_state(AUDIO, audio_store)
        keep_person_data(registrar, "voice", audio_store.count_of, audio_store.delete_of)
        registrar.app_state(SETTINGS, settings)
        spoken = SpokenReplies(context, client, audio_store, settings)
        context.contracts.require(REPLY_TAPS).add(SPOKEN_MODES, spoken.tap)

        registrar.ws_message("voice_input", VoiceInputFrame())(streams.voice_input)
        registrar.ws_message("voice_stream_start", VoiceStreamStartFrame())(streams.start)
        registrar.ws_message("voice_stream_chunk", VoiceStreamChunkFrame())(streams.chunk)
        registrar.ws_message("voice_stream_end", VoiceStreamEndFrame())(streams.end)
        for kind, (schema, description) in SERVER_FRAMES.items():
            registrar.ws_server_message(kind, schema, description)

        async def lifespan(context: Context) -> AsyncIterator[None]:
            context.hub.on_disconnect(streams.disconnected)
            yield
            await streams.close_all()

        registrar.lifespan(lifespan)


plugin = VoicePlugin()

__all__ = ["VoicePlugin", "VoiceUnavailable", "plugin"]
