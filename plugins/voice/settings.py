"""`[plugins.voice_engines]` (the voice service): which engines recognise and speak which
language, the limits of an upload and of a stream, and an optional OpenAI-compatible provider.
docs/voice.md explains each choice; docs/configuration.md lists the keys."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

MB = 1024 * 1024
POSITIVE = validate.Range(min=0, min_inclusive=False)
LANGUAGES = ("zh", "en", "ja", "ko")


@dataclass(frozen=True, kw_only=True)
class VoiceEngineSettings(PluginSettings):
    stt_engines: list[str] = setting(fields.List(fields.String(), load_default=lambda: ["whisper", "pocketsphinx", "openai"], metadata={
        "description": "Speech-recognition engines to load, by name (built in: `whisper`, `pocketsphinx`, "
                       "`openai`; more through the `gateway.voice_engines` entry-point group). An engine that "
                       "cannot run here (`openai` without `openai_base_url`) is listed in the status as not loaded."}))
    stt_language_engines: dict[str, str] = setting(fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict, metadata={
        "description": "Engine per language, e.g. {en = \"pocketsphinx\"}; a language not named here goes to the "
                       "first loaded engine of `stt_engines` that recognises it."}))
    default_language: str = setting(fields.String(load_default="zh", validate=validate.OneOf(LANGUAGES), metadata={
        "description": "Language used for `language=auto` when the engine cannot detect one (and on clips "
                       "shorter than `detect_min_seconds`, where detection guesses)."}))
    detect_min_seconds: float = setting(fields.Float(load_default=1.0, validate=validate.Range(min=0.0), metadata={
        "description": "Shortest audio on which `language=auto` asks the engine to detect the language."}))
    tts_engines: list[str] = setting(fields.List(fields.String(), load_default=lambda: ["piper", "espeak", "openai"], metadata={
        "description": "Speech-synthesis engines to load, by name (built in: `piper`, `espeak`, `openai`)."}))
    tts_default_voices: dict[str, str] = setting(fields.Dict(keys=fields.String(), values=fields.String(), load_default=lambda: {
        "en": "piper:en_US-joe-medium", "zh": "espeak:cmn-latn-pinyin"}, metadata={
        "description": "Voice used per language when a request names none (ids as GET /api/v1/tts/voices lists)."}))
    model_directory: str = setting(fields.String(load_default="", metadata={
        "description": "Where model files joined from their packages are kept (Whisper's, written once: read "
                       "from there it takes 100 MB of memory, handed over from memory 240). Empty: DATA_DIR/models."}))
    whisper_threads: int = setting(fields.Integer(load_default=2, validate=validate.Range(min=1, max=64), metadata={
        "description": "CPU threads of one Whisper recognition (CTranslate2 int8)."}))
    whisper_beam_size: int = setting(fields.Integer(load_default=1, validate=validate.Range(min=1, max=10), metadata={
        "description": "Beam width of Whisper's decoding: 1 (greedy) is the fastest; wider beams cost time per token."}))
    recognitions_at_once: int = setting(fields.Integer(load_default=2, validate=validate.Range(min=1, max=32), metadata={
        "description": "Recognitions the service runs at once (each in the executor); more wait their turn."}))
    max_audio_bytes: int = setting(fields.Integer(load_default=10 * 1024 * 1024, validate=validate.Range(min=1024), metadata={
        "description": "Largest upload to /api/v1/transcribe (413 beyond) and most bytes one stream may send."}))
    max_audio_seconds: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Longest audio recognised, uploaded or streamed (413 / a stream error beyond)."}))
    stream_idle_seconds: float = setting(fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "A stream that sends nothing for this long is closed with errorType `stream_timeout`."}))
    interim_interval_seconds: float = setting(fields.Float(load_default=0.3, validate=POSITIVE, metadata={
        "description": "New audio (seconds) a stream needs before its next interim pass; passes run back to "
                       "back (the next starts when the last finishes), so at stop the newest covers nearly all."}))
    stream_segments: bool = setting(fields.Boolean(load_default=False, metadata={
        "description": "Cut a stream at its pauses: the audio up to a pause is recognised once and kept, "
                       "and the final recognises only what follows (a long dictation's final costs its last "
                       "sentence, not all of it). Off by default: on the bench's dictation it cost a word "
                       "now and then (bench/README.md, docs/voice.md \"Segments\")."}))
    max_tts_chars: int = setting(fields.Integer(load_default=2000, validate=validate.Range(min=1), metadata={
        "description": "Longest text one /api/v1/tts call speaks (400 beyond)."}))
    openai_base_url: str = setting(fields.String(load_default="", metadata={
        "description": "An OpenAI-compatible provider (…/v1) for the `openai` engine: /audio/transcriptions "
                       "and /audio/speech. Empty: the engine is not loaded."}))
    openai_api_key: str = setting(fields.String(load_default="", metadata={
        "description": "Bearer key sent to `openai_base_url` (VOICE_OPENAI_API_KEY is read when empty)."}))
    openai_stt_model: str = setting(fields.String(load_default="whisper-1", metadata={
        "description": "Model named in the provider's transcription calls."}))
    openai_tts_model: str = setting(fields.String(load_default="tts-1", metadata={
        "description": "Model named in the provider's speech calls."}))
    openai_voices: list[str] = setting(fields.List(fields.String(), load_default=lambda: ["alloy"], metadata={
        "description": "The provider's voices listed as `openai:<name>` (they speak any language)."}))
    openai_languages: list[str] = setting(fields.List(fields.String(), load_default=lambda: list(LANGUAGES), metadata={
        "description": "Languages the provider is trusted to recognise and speak."}))
    openai_timeout: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds one provider call may take, connecting included."}))


@dataclass(frozen=True, kw_only=True)
class VoiceSettings(PluginSettings):
    timeout: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds the voice service may take to answer one call (a transcription, a synthesis)."}))
    connect_timeout: float = setting(fields.Float(load_default=3.0, validate=POSITIVE, metadata={
        "description": "Seconds to reach the voice service; past them it is `voice_service_unreachable`."}))
    max_upload_bytes: int = setting(fields.Integer(load_default=10 * MB, validate=POSITIVE, metadata={
        "description": "Largest recording of POST /voice/transcribe and `voice_input` (413 / `file_too_large`)."}))
    stream_max_bytes: int = setting(fields.Integer(load_default=10 * MB, validate=POSITIVE, metadata={
        "description": "Most audio bytes one streaming voice session may send (`voice_stream_too_large`)."}))
    stream_max_seconds: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Longest a streaming voice session may stay open (`voice_stream_too_long`)."}))
    stream_idle_timeout: float = setting(fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "Seconds without a chunk after which a streaming voice session is closed (`voice_stream_idle`)."}))
    final_timeout: float = setting(fields.Float(load_default=15.0, validate=POSITIVE, metadata={
        "description": "Seconds the voice service may take for a stream's final text after its end."}))
    spoken_replies: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Speak replies to `voice_msg` and `voice_assistant` turns (`stream_segments`)."}))
    tts_format: str = setting(fields.String(load_default="wav", validate=validate.OneOf(("wav", "mp3", "ogg")), metadata={
        "description": "Audio format of spoken replies (WAV segments are also joined into `full_audio_url`)."}))
    tts_speed: float = setting(fields.Float(load_default=1.0, validate=validate.Range(min=0.5, max=2.0), metadata={
        "description": "Speaking rate of spoken replies."}))
    voice_en: str = setting(fields.String(load_default="", metadata={
        "description": "Voice id for English sentences of spoken replies; \"\": the service's default."}))
    voice_zh: str = setting(fields.String(load_default="", metadata={
        "description": "Voice id for Chinese sentences of spoken replies; \"\": the service's default."}))
    max_sentence_chars: int = setting(fields.Integer(load_default=300, validate=validate.Range(min=20), metadata={
        "description": "A run of reply text without a sentence end is spoken in pieces of at most this many characters."}))
    synthesis_concurrency: int = setting(fields.Integer(load_default=2, validate=validate.Range(min=1), metadata={
        "description": "Sentences synthesized at once by this gateway instance (all replies together)."}))
    audio_url_ttl: int = setting(fields.Integer(load_default=3600, validate=POSITIVE, metadata={
        "description": "Seconds a spoken reply's signed audio link works (the owner's token works after)."}))
    audio_retention_days: float = setting(fields.Float(load_default=7.0, validate=POSITIVE, metadata={
        "description": "Days a spoken reply's audio is kept; older audio is deleted (hourly)."}))
