"""What the gateway's voice endpoints and frames take and answer (docs/voice.md, "In the
gateway"); the voice service's bodies are those of its wire API, passed on."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

BINARY = {"type": "string", "format": "binary"}
LANGUAGES = ("zh", "en", "ja", "ko", "auto")
STREAM_FORMATS = ("webm", "wav", "pcm", "opus", "ogg")
TTS_FORMATS = ("wav", "mp3", "ogg")
MODES = ("text", "voice_msg", "voice_assistant")
SESSION_ID = validate.Regexp(r"^[A-Za-z0-9_\-.:]{1,128}\Z")


class Open(marshmallow.Schema):
    """A body of the voice service's, passed on: the fields named here, and any it adds."""

    class Meta:
        unknown = marshmallow.INCLUDE


# ------------------------------------------------------------------ HTTP


class TranscribeForm(marshmallow.Schema):
    audio = fields.Raw(required=True, metadata={**BINARY, "description": "The recording, up to 10 MB: PCM, WAV, MP3, "
                                                                          "OGG/Opus, FLAC, WebM..."})
    language = fields.String(validate=validate.OneOf(LANGUAGES), metadata={
        "description": "`zh`, `en`, `ja`, `ko` or `auto` (default: detected where the engine can)."})
    format = fields.String(metadata={"description": "A hint of the audio's format; else it is sniffed."})


class Transcription(Open):
    success = fields.Boolean(required=True, metadata={"description": "true"})
    text = fields.String(required=True, metadata={"description": "What was said; \"\" when nothing was."})
    language = fields.String(metadata={"description": "The language recognised."})
    duration_ms = fields.Integer(metadata={"description": "The audio's length."})
    engine = fields.String(metadata={"description": "The engine that recognised it."})
    processing_ms = fields.Integer(metadata={"description": "How long recognition took."})


class SpeechBody(marshmallow.Schema):
    text = fields.String(required=True, validate=validate.Length(min=1, max=5000),
                         metadata={"description": "What to say (up to 5000 characters)."})
    voice = fields.String(validate=validate.Length(min=1, max=128), metadata={
        "description": "A voice id of GET /voice/tts/voices; default: the language's default voice."})
    language = fields.String(validate=validate.OneOf(LANGUAGES), metadata={
        "description": "`zh`, `en`, ... or `auto`; default: from the voice, else from the text."})
    format = fields.String(load_default="wav", validate=validate.OneOf(TTS_FORMATS),
                           metadata={"description": "`wav` (default), `mp3` or `ogg`."})
    speed = fields.Float(load_default=1.0, validate=validate.Range(min=0.5, max=2.0),
                         metadata={"description": "0.5 to 2.0 (default 1.0)."})


class Voice(Open):
    id = fields.String(required=True)
    name = fields.String(required=True)
    language = fields.String(required=True)
    engine = fields.String(required=True)
    sample_rate = fields.Integer()


class VoiceList(Open):
    voices = fields.List(fields.Nested(Voice), required=True)
    count = fields.Integer(required=True)


class SpeechStatus(Open):
    engines = fields.List(fields.Raw(), required=True, metadata={"description": "The synthesis engines."})
    default_voices = fields.Dict(keys=fields.String(), values=fields.String(allow_none=True),
                                 metadata={"description": "The default voice id per language."})
    ready = fields.Boolean(required=True, metadata={"description": "Whether speech can be synthesized now."})


class SttEngine(Open):
    name = fields.String(required=True)
    languages = fields.List(fields.String(), required=True)
    model = fields.String(allow_none=True)
    loaded = fields.Boolean()
    model_loaded = fields.Boolean()


class SttStatus(Open):
    engines = fields.List(fields.Nested(SttEngine), required=True)
    default_engine = fields.String(allow_none=True)
    languages = fields.List(fields.String(), required=True)
    sample_rate = fields.Integer()


class TtsSummary(Open):
    engines = fields.List(fields.Raw(), required=True)
    voices = fields.Integer()
    languages = fields.List(fields.String())


class VoiceStatus(marshmallow.Schema):
    available = fields.Boolean(required=True, metadata={"description": "true: the voice service answered."})
    stt = fields.Nested(SttStatus, required=True, metadata={"description": "Recognition: engines, languages."})
    tts = fields.Nested(TtsSummary, required=True, metadata={"description": "Synthesis: engines, voices."})
    tts_status = fields.Nested(SpeechStatus, required=True, metadata={"description": "GET /voice/tts/status."})


class AudioQuery(marshmallow.Schema):
    expires = fields.Integer(metadata={"description": "With `signature`: the link works without a bearer token "
                                                      "until then (Unix seconds)."})
    signature = fields.String(metadata={"description": "The link's HMAC; without it the owner's bearer token is "
                                                       "required."})


# ------------------------------------------------------------------ frames a device sends


class VoiceInputFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=SESSION_ID)
    mode = fields.String(load_default="voice_msg", validate=validate.OneOf(MODES),
                         metadata={"description": "The turn's mode; default `voice_msg` (a spoken reply)."})
    audio_data = fields.String(required=True, metadata={"description": "The whole recording, base64 (up to 10 MB)."})
    language = fields.String(load_default="auto", validate=validate.OneOf(LANGUAGES))
    format = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=16))
    client_msg_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=128))
    timestamp = fields.Integer(load_default=None, allow_none=True)


class VoiceStreamStartFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=SESSION_ID)
    mode = fields.String(load_default="voice_msg", validate=validate.OneOf(MODES),
                         metadata={"description": "The turn's mode; default `voice_msg` (a spoken reply)."})
    format = fields.String(load_default="webm", validate=validate.OneOf(STREAM_FORMATS),
                           metadata={"description": "`webm` (default), `wav`, `pcm` (16 kHz mono s16le unless "
                                                    "`sample_rate`), `opus`, `ogg`."})
    language = fields.String(load_default="zh", validate=validate.OneOf(LANGUAGES))
    sample_rate = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=8000, max=48000))
    timestamp = fields.Integer(load_default=None, allow_none=True)


class VoiceStreamChunkFrame(marshmallow.Schema):
    audio_data = fields.String(required=True, metadata={"description": "The next piece of encoded audio, base64."})
    sequence = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=0),
                              metadata={"description": "0, 1, 2...: chunks are forwarded in this order (one that "
                                                       "comes early is held, up to 16 past the one awaited); a "
                                                       "chunk sent again is dropped."})
    timestamp = fields.Integer(load_default=None, allow_none=True)


class VoiceStreamEndFrame(marshmallow.Schema):
    timestamp = fields.Integer(load_default=None, allow_none=True)


# ------------------------------------------------------------------ frames the gateway sends


class RecognitionFrame(marshmallow.Schema):
    role = fields.String(required=True, validate=validate.Equal("user"))
    msg_type = fields.String(required=True, validate=validate.Equal("chat"))
    message_id = fields.String(required=True, metadata={"description": "`voice_<random>`: the same on a stream's "
                                                                       "every interim and its final."})
    session_id = fields.String(required=True)
    text = fields.String(required=True)
    content = fields.String(required=True, metadata={"description": "The same as `text`."})
    timestamp = fields.Integer(required=True)


class VoiceInterimFrame(RecognitionFrame):
    is_final = fields.Boolean(required=True, metadata={"description": "false"})


class VoiceFinalFrame(RecognitionFrame):
    is_final = fields.Boolean(required=True, metadata={"description": "true"})
    language = fields.String(required=True)
    duration_ms = fields.Integer(required=True)


class VoiceTranscriptFrame(RecognitionFrame):
    success = fields.Boolean(required=True)
    language = fields.String(required=True)
    duration_ms = fields.Integer(required=True)
    client_msg_id = fields.String(required=True, allow_none=True)


class Segment(marshmallow.Schema):
    index = fields.Integer(required=True, metadata={"description": "0, 1, 2... in the reply's order."})
    text = fields.String(required=True, metadata={"description": "The sentence, as read aloud."})
    audio_url = fields.String(required=True, metadata={"description": "Its audio (a signed link); \"\" when it "
                                                                      "could not be synthesized."})
    duration_ms = fields.Integer(required=True)
    error = fields.String(metadata={"description": "Why there is no audio."})


class StreamSegmentsFrame(marshmallow.Schema):
    role = fields.String(required=True, validate=validate.Equal("assistant"))
    msg_type = fields.String(required=True, validate=validate.Equal("chat"))
    message_id = fields.String(required=True, metadata={"description": "`reply_<turn_id>`, as the reply's frames."})
    session_id = fields.String(required=True)
    turn_id = fields.String(required=True)
    seq = fields.Integer(required=True)
    response_mode = fields.String(required=True, validate=validate.OneOf(("voice_msg", "voice_assistant")),
                                  metadata={"description": "The turn's mode, as on every frame of the reply."})
    timestamp = fields.Integer(required=True)
    segments = fields.List(fields.Nested(Segment), required=True, metadata={"description": "One sentence a frame."})

