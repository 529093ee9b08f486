"""The OpenAI-compatible door's other routes: `/v1/embeddings` from the configured embeddings
provider (the core's `context.embeddings`: the embedded model by default), and `/v1/audio/*`
through the voice service, called over the core's peer transport (`VoicePeer`)."""
from __future__ import annotations

import base64
import io
import re
import struct
from typing import Any

import aiohttp
import marshmallow
from aiohttp import BodyPartReader, web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.embeddings import EmbeddingError
from gateway.errors import ApiError, BadRequest, ServiceUnavailable
from gateway.openapi import api_doc
from gateway.peers import PeerContext, PeerAnswer, PeerClient, PeerTimeout
from gateway.text import UNSPACED_SCRIPT_RANGES
from gateway.validation import each_multipart_part, parse_body, read_part
from plugins.chat.contract import require_chat_user

from .api import engine_of
from .contract import message_too_long
from .door import EMBEDDINGS_MODEL
from .schemas import EmbeddingList, Transcript

routes = web.RouteTableDef()

# OpenAI's own bound on an uploaded recording; the voice service applies its own as well.
MAX_AUDIO_BYTES = 25 * 1024 * 1024
TRANSCRIPT_FORMATS = ("json", "text", "verbose_json")
# OpenAI's speech formats -> what the voice service makes (OpenAI's `opus` is Ogg Opus).
SPEECH_FORMATS = {"mp3": "mp3", "wav": "wav", "opus": "ogg"}
# OpenAI's voice names: the voice service's default voice for the text's language.
OPENAI_VOICES = frozenset({"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
                           "verse", "marin", "cedar"})


# ---------------------------------------------------------------- embeddings

class EmbeddingsBody(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    model = fields.String(load_default=EMBEDDINGS_MODEL)
    input = fields.Raw(required=True, metadata={"description": "A string or a list of strings (token arrays are "
                                                                "refused: 400 token_input_unsupported)."})
    encoding_format = fields.String(load_default="float", validate=validate.OneOf(("float", "base64")))
    dimensions = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=1))
    user = fields.String(load_default=None, allow_none=True)


def texts_of(value: Any, max_inputs: int, max_chars: int) -> list[str]:
    """The texts to embed; 400 for token arrays, empty strings and too many or too long texts."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts:
        raise BadRequest("input must be a string or a non-empty list of strings.", error_type="validation_error")
    if any(isinstance(item, (int, list)) and not isinstance(item, bool) for item in texts):
        raise BadRequest("Token arrays are not accepted: this model has its own tokenizer.",
                         error_type="token_input_unsupported", hint="Send the text as strings.")
    if not all(isinstance(item, str) for item in texts):
        raise BadRequest("input must be a string or a list of strings.", error_type="validation_error")
    if len(texts) > max_inputs:
        raise BadRequest(f"At most {max_inputs} inputs per request.", error_type="validation_error",
                         hint="Send them in several requests ([plugins.ai_core] max_embedding_inputs).")
    for index, text in enumerate(texts):
        if not text:
            raise BadRequest(f"input[{index}] is empty.", error_type="validation_error")
        if len(text) > max_chars:
            raise message_too_long(len(text), max_chars, "[plugins.ai_core] max_message_chars", f"input[{index}]")
    return texts


APPROXIMATE_TOKEN = re.compile(f"[{UNSPACED_SCRIPT_RANGES}]|[^\\s{UNSPACED_SCRIPT_RANGES}]+")


def approximate_tokens(text: str) -> int:
    """OpenAI clients read `usage`; the embedder does not count, so this estimates: one token a
    word or a CJK character."""
    return max(1, len(APPROXIMATE_TOKEN.findall(text)))


@routes.post("/v1/embeddings", name="ai_core.openai_embeddings")
@api_doc("OpenAI-compatible embeddings from the configured embeddings provider (`model` `embeddings`)",
         body=EmbeddingsBody, responses={200: EmbeddingList}, errors=(400, 403, 404, 413, 503),
         description="Passages are embedded as documents (e5's `passage:` prefix). `dimensions` other than the "
                     "model's: 400 dimensions_unsupported; `encoding_format` base64: little-endian float32.")
async def openai_embeddings(request: web.Request) -> web.Response:
    await require_chat_user(request)
    body = await parse_body(request, EmbeddingsBody())
    settings = engine_of(request).settings
    embedder = get_context(request).embeddings
    if body["model"] not in (EMBEDDINGS_MODEL, embedder.model_id):
        raise ApiError(f"The embeddings model {body['model']!r} does not exist.", error_type="model_not_found",
                       status=404, hint=f"Use {EMBEDDINGS_MODEL!r}: the configured embeddings provider.")
    texts = texts_of(body["input"], settings.max_embedding_inputs, settings.max_message_chars)
    try:
        await embedder.prepare()
        if body["dimensions"] is not None and body["dimensions"] != embedder.dimension:
            raise BadRequest(f"This model makes vectors of {embedder.dimension} dimensions only.",
                             error_type="dimensions_unsupported", hint="Leave out dimensions.")
        vectors = await embedder.embed_passages(texts)
    except EmbeddingError as error:
        raise ServiceUnavailable(f"The embeddings provider failed: {error}", error_type="embeddings_unavailable",
                                 hint="Check [embeddings] (EMBEDDINGS_BASE_URL) or try again.") from None
    data = [{"object": "embedding", "index": index,
             "embedding": (base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
                           if body["encoding_format"] == "base64" else vector)}
            for index, vector in enumerate(vectors)]
    tokens = sum(approximate_tokens(text) for text in texts)
    return web.json_response({"object": "list", "data": data, "model": embedder.model_id,
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


# ---------------------------------------------------------------- audio

class TranscriptionForm(marshmallow.Schema):
    """For the document: the form is read part by part (`read_form`)."""
    file = fields.Raw(required=True, metadata={"type": "string", "format": "binary",
                                               "description": f"The recording, at most {MAX_AUDIO_BYTES} bytes."})
    model = fields.String(metadata={"description": "Any name (whisper-1...): the voice service's engine answers."})
    language = fields.String(metadata={"description": "zh, en, ja, ko (default: detected)."})
    prompt = fields.String(metadata={"description": "Accepted and not used."})
    response_format = fields.String(validate=validate.OneOf(TRANSCRIPT_FORMATS))
    temperature = fields.Float(metadata={"description": "Accepted and not used."})


class SpeechBody(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE  # `instructions` and what OpenAI adds next

    model = fields.String(required=True)
    input = fields.String(required=True, validate=validate.Length(min=1, max=4096))
    voice = fields.String(required=True, validate=validate.Length(min=1, max=200))
    response_format = fields.String(load_default="mp3", metadata={
        "description": "mp3, wav or opus; aac, flac, pcm: 400 format_unsupported."})
    speed = fields.Float(load_default=1.0, validate=validate.Range(min=0.5, max=2.0))


class VoicePeer(PeerClient):
    def __init__(self, context: PeerContext, read_timeout: float) -> None:
        super().__init__(context, "voice_service", service="voice service", error_prefix="voice_service",
                         timeout=PeerTimeout.from_config(context.config, read=read_timeout))


def voice_of(request: web.Request) -> VoicePeer:
    return VoicePeer(get_context(request), engine_of(request).settings.voice_timeout)


async def read_form(request: web.Request) -> dict:
    """The multipart fields of a transcription: `file` as (bytes, name, type), the rest as text."""
    if not request.content_type.startswith("multipart/"):
        raise BadRequest("Send multipart/form-data with the field `file`.", error_type="validation_error")
    found: dict = {}

    async def keep(part: BodyPartReader) -> None:
        name = part.name or ""
        limit = MAX_AUDIO_BYTES if name == "file" else 4096
        data = await read_part(part, limit, lambda: ApiError(
            f"The field `{name}` is larger than {limit} bytes.", status=413,
            error_type="audio_too_large" if name == "file" else "validation_error"))
        found[name] = ((bytes(data), part.filename or "audio", part.headers.get("Content-Type") or
                        "application/octet-stream") if name == "file" else data.decode("utf-8", "replace").strip())

    await each_multipart_part(request, keep, lambda reason: BadRequest(
        f"The multipart body cannot be read: {reason}", error_type="validation_error"))
    if "file" not in found:
        raise BadRequest("The multipart body has no field `file`.", error_type="validation_error")
    return found


@routes.post("/v1/audio/transcriptions", name="ai_core.openai_transcriptions")
@api_doc("OpenAI-compatible transcription through the voice service", body=TranscriptionForm,
         content_type="multipart/form-data", responses={200: {"application/json": Transcript, "text/plain": None}},
         errors=(400, 403, 413, 422, 502),
         description="`response_format` json (default), text or verbose_json; srt and vtt: 400. Silence answers "
                     "an empty text. The voice service's refusals (audio it cannot decode, a language it does not "
                     "recognise) are passed on.")
async def openai_transcriptions(request: web.Request) -> web.Response:
    identity = await require_chat_user(request)
    form = await read_form(request)
    response_format = form.get("response_format") or "json"
    if response_format not in TRANSCRIPT_FORMATS:
        raise BadRequest(f"response_format {response_format!r} is not offered.", error_type="format_unsupported",
                         hint="Use json, text or verbose_json.")
    audio, filename, content_type = form["file"]
    upload = aiohttp.FormData()
    upload.add_field("audio", io.BytesIO(audio), filename=filename, content_type=content_type)
    upload.add_field("language", form.get("language") or "auto")
    if identity.kind != "service":
        upload.add_field("user_id", identity.user_id)
    voice = voice_of(request)
    answer = await voice.request("POST", "/api/v1/transcribe", data=upload)
    body = answer.json() or {}
    if answer.status == 422 and body.get("errorType") == "no_speech":
        body = {"text": "", "language": body.get("language") or "", "duration_ms": 0}
    elif answer.status >= 400:
        raise voice.refusal(answer)
    text = str(body.get("text") or "")
    if response_format == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    if response_format == "json":
        return web.json_response({"text": text})
    return web.json_response({"task": "transcribe", "language": str(body.get("language") or ""),
                              "duration": round(float(body.get("duration_ms") or 0) / 1000, 3), "text": text,
                              "segments": []})


@routes.post("/v1/audio/speech", name="ai_core.openai_speech")
@api_doc("OpenAI-compatible speech through the voice service", body=SpeechBody,
         responses={200: {"audio/mpeg": None, "audio/wav": None, "audio/ogg": None}}, errors=(400, 403, 422, 502),
         description="`response_format` mp3 (default), wav or opus (Ogg Opus); aac, flac and pcm: 400 "
                     "format_unsupported. OpenAI's voice names speak with the default voice of the text's "
                     "language; a voice id of the voice service picks that voice.")
async def openai_speech(request: web.Request) -> web.Response:
    await require_chat_user(request)
    body = await parse_body(request, SpeechBody())
    wanted = body["response_format"]
    if wanted not in SPEECH_FORMATS:
        raise BadRequest(f"The voice service cannot make {wanted!r} audio.", error_type="format_unsupported",
                         hint="Use mp3, wav or opus.")
    request_body: dict = {"text": body["input"], "format": SPEECH_FORMATS[wanted], "speed": body["speed"]}
    if body["voice"] not in OPENAI_VOICES:
        request_body["voice"] = body["voice"]
    voice = voice_of(request)
    answer: PeerAnswer = await voice.request("POST", "/api/v1/tts", json_body=request_body)
    if answer.status >= 400:
        raise voice.refusal(answer)
    return web.Response(body=answer.body, content_type=answer.content_type or "application/octet-stream")
