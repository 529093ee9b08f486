"""One-shot transcription (`/api/v1/transcribe`): a recording sent as multipart, read within
its limits, decoded and recognised."""
from __future__ import annotations

import time
from typing import Any

from aiohttp import BodyPartReader, web

from gateway.errors import ApiError
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.validation import each_multipart_part, load, read_part

from . import audio
from .recognition import SERVICE, caller, failure
from .schemas import TranscribeForm, Transcription

routes = web.RouteTableDef()


@routes.post("/api/v1/transcribe", name="voice.transcribe")
@api_doc("Transcribe a recording (multipart `audio`; WAV, MP3, OGG/Opus, FLAC, WebM or raw pcm)",
         body=TranscribeForm, content_type="multipart/form-data", responses={200: Transcription},
         errors=(400, 413, 422, 502, 503),
         description="Failures carry `success: false` with the error body: 400 `audio_empty`, "
                     "`audio_undecodable`, `sample_rate_unsupported` (outside 4000-192000 Hz); 413 "
                     "`audio_too_large` / `audio_too_long`; 422 `no_speech` (silence) and `language_unsupported` "
                     "(naming the language); 502/503 an engine failing.")
async def transcribe(request: web.Request) -> web.Response:
    identity = await require_user(request)
    service = request.config_dict[SERVICE]
    if not request.content_type.startswith("multipart/"):
        raise failure("Send the audio as multipart/form-data in the field `audio`.", "validation_error",
                      "Field `audio` (file), optional `language`, `format`, `sample_rate`.")
    started = time.perf_counter()
    fields: dict[str, Any] = {}
    limit = service.settings.max_audio_bytes

    async def keep(part: BodyPartReader) -> None:
        if part.name == "audio":
            fields["audio"] = await read_limited(part, limit)
        elif part.name in ("language", "format", "sample_rate", "user_id"):
            value = await read_limited(part, 256, what=f"The field `{part.name}`", status=400,
                                       error_type="validation_error")
            fields[part.name] = value.decode("utf-8", "replace").strip()
        else:
            await part.release()

    await each_multipart_part(request, keep, lambda reason: failure(
        f"The multipart body cannot be read: {reason}", "validation_error",
        "Send multipart/form-data with the field `audio`."))
    if "audio" not in fields:
        raise failure("The multipart body has no field `audio`.", "validation_error", "Name the file field `audio`.")
    data = fields.pop("audio")
    try:
        form = load(TranscribeForm(partial=("audio",)), {key: value for key, value in fields.items() if value}, "form")
    except ApiError as error:
        error.extra["success"] = False
        raise
    language = form.get("language", "auto")
    service.recognizer(language)   # 422 before decoding when nothing recognises the language
    try:
        samples = await service.run(audio.decode, data, form.get("format"), form.get("sample_rate"),
                                    service.settings.max_audio_seconds)
    except audio.AudioError as error:
        raise failure(error.message, error.error_type, error.hint, error.status) from None
    result = await service.recognize(samples, language, user_id=caller(identity, form.get("user_id")),
                                     source="upload", started=started)
    del result["recognised_ms"]
    if not result["text"]:
        raise failure("No speech was recognised in the audio.", "no_speech",
                      "Speak closer to the microphone, or check that the recording has sound.", 422,
                      language=result["language"])
    return web.json_response({"success": True, **result})


async def read_limited(part: BodyPartReader, limit: int, *, what: str = "The audio", status: int = 413,
                       error_type: str = "audio_too_large") -> bytes:
    return await read_part(part, limit, lambda: failure(
        f"{what} is larger than {limit} bytes.", error_type,
        "Send a shorter recording, or compress it (Opus, MP3)." if status == 413
        else "Send the form fields as short text.", status))
