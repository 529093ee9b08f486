"""The voice service's requests and answers (docs/voice.md, "The voice service")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from .audio import ENCODINGS, STREAM_FORMATS

LANGUAGE_CHOICES = ("zh", "en", "ja", "ko", "auto")
UPLOAD_FORMATS = ("pcm", "wav", "mp3", "ogg", "opus", "flac", "webm", "m4a", "mp4", "aac")
BINARY = {"type": "string", "format": "binary"}


class TranscribeForm(marshmallow.Schema):
    audio = fields.Raw(required=True, metadata={**BINARY, "description": "The recording (up to max_audio_bytes)."})
    language = fields.String(validate=validate.OneOf(LANGUAGE_CHOICES), metadata={
        "description": "zh, en, ja, ko or auto (default): detected where the engine can, else the configured one."})
    format = fields.String(validate=validate.OneOf(UPLOAD_FORMATS), metadata={
        "description": "A hint; the container is sniffed from the bytes. `pcm` (no header) must be named: "
                       "signed 16-bit little-endian mono at 16 kHz unless `sample_rate` says otherwise."})
    sample_rate = fields.Integer(validate=validate.Range(min=4000, max=192000), metadata={
        "description": "Sample rate of `pcm` audio (default 16000)."})
    user_id = fields.String(validate=validate.Length(min=1, max=128), metadata={
        "description": "Whom the service credential transcribes for (the STT log's user)."})


class Transcription(marshmallow.Schema):
    success = fields.Boolean(required=True, metadata={"description": "Always true here."})
    text = fields.String(required=True)
    language = fields.String(required=True, metadata={"description": "Recognised (or asked-for) language."})
    duration_ms = fields.Integer(required=True, metadata={"description": "Length of the audio."})
    engine = fields.String(required=True)
    processing_ms = fields.Float(required=True, metadata={"description": "Decoding and recognition time."})


class TranscriptionFailure(marshmallow.Schema):
    """What a failed transcription answers: the error body (the document lists it as ErrorBody,
    which allows these members) with `success: false`, and `language` on language_unsupported."""
    success = fields.Boolean(required=True, metadata={"description": "Always false."})
    error = fields.String(required=True)
    errorType = fields.String(required=True)
    hint = fields.String()
    language = fields.String()


class StreamQuery(marshmallow.Schema):
    language = fields.String(load_default="auto", validate=validate.OneOf(LANGUAGE_CHOICES))
    format = fields.String(load_default="webm", validate=validate.OneOf(STREAM_FORMATS), metadata={
        "description": "Encoding of the binary frames; `pcm` is s16le mono at 16 kHz unless `sample_rate`."})
    sample_rate = fields.Integer(validate=validate.Range(min=4000, max=192000))
    user_id = fields.String(validate=validate.Length(min=1, max=128))


class SttEngine(marshmallow.Schema):
    name = fields.String(required=True)
    languages = fields.List(fields.String(), required=True)
    model = fields.String(required=True)
    loaded = fields.Boolean(required=True, metadata={
        "description": "Ready to use: installed and configured (its model is read on first use)."})
    model_loaded = fields.Boolean(required=True, metadata={
        "description": "Its model is in memory now: read on first use, released after `[core] "
                       "model_idle_seconds` without use (docs/operations.md, \"Memory\")."})
    detects_language = fields.Boolean(required=True)
    error = fields.String(allow_none=True, metadata={"description": "Why it is not loaded."})


class SttStatus(marshmallow.Schema):
    engines = fields.List(fields.Nested(SttEngine), required=True)
    default_engine = fields.String(required=True, allow_none=True)
    languages = fields.List(fields.String(), required=True, metadata={
        "description": "Languages some loaded engine recognises."})
    unsupported_languages = fields.List(fields.String(), required=True, metadata={
        "description": "Languages of the API no loaded engine recognises (transcription answers 422)."})
    language_engines = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    default_language = fields.String(required=True)
    sample_rate = fields.Integer(required=True)


class TtsEngine(marshmallow.Schema):
    name = fields.String(required=True)
    loaded = fields.Boolean(required=True, metadata={
        "description": "Ready to use: installed and configured (its model is read on first use)."})
    model_loaded = fields.Boolean(required=True, metadata={
        "description": "Its model is in memory now: read on first use, released after `[core] "
                       "model_idle_seconds` without use (docs/operations.md, \"Memory\")."})
    voices = fields.Integer(required=True)
    error = fields.String(allow_none=True)


class TtsStatus(marshmallow.Schema):
    engines = fields.List(fields.Nested(TtsEngine), required=True)
    voices = fields.Integer(required=True)
    languages = fields.List(fields.String(), required=True)
    default_voices = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    ready = fields.Boolean(required=True)


class VoiceStatus(marshmallow.Schema):
    stt = fields.Nested(SttStatus, required=True)
    tts = fields.Nested(TtsStatus, required=True)


class TtsRequest(marshmallow.Schema):
    text = fields.String(required=True, validate=validate.Length(min=1), metadata={
        "description": "What to say; markdown marks and code are not read aloud."})
    voice = fields.String(validate=validate.Length(min=1, max=200), metadata={
        "description": "A voice id from GET /api/v1/tts/voices; default: the language's default voice."})
    language = fields.String(validate=validate.OneOf(("zh", "en", "ja", "ko", "auto")), metadata={
        "description": "Default: the voice's language, else guessed from the text (Chinese characters: zh)."})
    format = fields.String(load_default="wav", validate=validate.OneOf(tuple(ENCODINGS)))
    speed = fields.Float(load_default=1.0, validate=validate.Range(min=0.5, max=2.0))


class VoiceOut(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    language = fields.String(required=True, metadata={"description": "ISO 639-1, or `*` for any."})
    engine = fields.String(required=True)
    sample_rate = fields.Integer(required=True)


class VoiceList(marshmallow.Schema):
    voices = fields.List(fields.Nested(VoiceOut), required=True)
    count = fields.Integer(required=True)
