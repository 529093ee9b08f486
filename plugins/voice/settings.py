"""`[plugins.voice_engines]` (the voice service): which engines recognise and speak which
language, the limits of an upload and of a stream, and an optional OpenAI-compatible provider.
docs/voice.md explains each choice; docs/configuration.md lists the keys."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings

POSITIVE = validate.Range(min=0, min_inclusive=False)
LANGUAGES = ("zh", "en", "ja", "ko")


class VoiceEngineSettings(PluginSettings):
    stt_engines = fields.List(fields.String(), load_default=lambda: ["whisper", "pocketsphinx", "openai"], metadata={
        "description": "Speech-recognition engines to load, by name (built in: `whisper`, `pocketsphinx`, "
                       "`openai`; more through the `gateway.voice_engines` entry-point group). An engine that "
                       "cannot run here (`openai` without `openai_base_url`) is listed in the status as not loaded."})
    stt_language_engines = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict, metadata={
        "description": "Engine per language, e.g. {en = \"pocketsphinx\"}; a language not named here goes to the "
                       "first loaded engine of `stt_engines` that recognises it."})
    default_language = fields.String(load_default="zh", validate=validate.OneOf(LANGUAGES), metadata={
        "description": "Language used for `language=auto` when the engine cannot detect one (and on clips "
                       "shorter than `detect_min_seconds`, where detection guesses)."})
    detect_min_seconds = fields.Float(load_default=1.0, validate=validate.Range(min=0.0), metadata={
        "description": "Shortest audio on which `language=auto` asks the engine to detect the language."})
    tts_engines = fields.List(fields.String(), load_default=lambda: ["piper", "espeak", "openai"], metadata={
        "description": "Speech-synthesis engines to load, by name (built in: `piper`, `espeak`, `openai`)."})
    tts_default_voices = fields.Dict(keys=fields.String(), values=fields.String(), load_default=lambda: {
        "en": "piper:en_US-joe-medium", "zh": "espeak:cmn-latn-pinyin"}, metadata={
        "description": "Voice used per language when a request names none (ids as GET /api/v1/tts/voices lists)."})
    model_directory = fields.String(load_default="", metadata={
        "description": "Where model files joined from their packages are kept (Whisper's, written once: read "
                       "from there it takes 100 MB of memory, handed over from memory 240). Empty: DATA_DIR/models."})
    whisper_threads = fields.Integer(load_default=2, validate=validate.Range(min=1, max=64), metadata={
        "description": "CPU threads of one Whisper recognition (CTranslate2 int8)."})
    whisper_beam_size = fields.Integer(load_default=1, validate=validate.Range(min=1, max=10), metadata={
        "description": "Beam width of Whisper's decoding: 1 (greedy) is the fastest; wider beams cost time per token."})
    recognitions_at_once = fields.Integer(load_default=2, validate=validate.Range(min=1, max=32), metadata={
        "description": "Recognitions the service runs at once (each in the executor); more wait their turn."})
    max_audio_bytes = fields.Integer(load_default=10 * 1024 * 1024, validate=validate.Range(min=1024), metadata={
        "description": "Largest upload to /api/v1/transcribe (413 beyond) and most bytes one stream may send."})
    max_audio_seconds = fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Longest audio recognised, uploaded or streamed (413 / a stream error beyond)."})
    stream_idle_seconds = fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "A stream that sends nothing for this long is closed with errorType `stream_timeout`."})
    interim_interval_seconds = fields.Float(load_default=0.3, validate=POSITIVE, metadata={
        "description": "New audio (seconds) a stream needs before its next interim pass; passes run back to "
                       "back (the next starts when the last finishes), so at stop the newest covers nearly all."})
    stream_segments = fields.Boolean(load_default=False, metadata={
        "description": "Cut a stream at its pauses: the audio up to a pause is recognised once and kept, "
                       "and the final recognises only what follows (a long dictation's final costs its last "
                       "sentence, not all of it). Off by default: on the bench's dictation it cost a word "
                       "now and then (bench/README.md, docs/voice.md \"Segments\")."})
    max_tts_chars = fields.Integer(load_default=2000, validate=validate.Range(min=1), metadata={
        "description": "Longest text one /api/v1/tts call speaks (400 beyond)."})
    openai_base_url = fields.String(load_default="", metadata={
        "description": "An OpenAI-compatible provider (…/v1) for the `openai` engine: /audio/transcriptions "
                       "and /audio/speech. Empty: the engine is not loaded."})
    openai_api_key = fields.String(load_default="", metadata={
        "description": "Bearer key sent to `openai_base_url` (VOICE_OPENAI_API_KEY is read when empty)."})
    openai_stt_model = fields.String(load_default="whisper-1", metadata={
        "description": "Model named in the provider's transcription calls."})
    openai_tts_model = fields.String(load_default="tts-1", metadata={
        "description": "Model named in the provider's speech calls."})
    openai_voices = fields.List(fields.String(), load_default=lambda: ["alloy"], metadata={
        "description": "The provider's voices listed as `openai:<name>` (they speak any language)."})
    openai_languages = fields.List(fields.String(), load_default=lambda: list(LANGUAGES), metadata={
        "description": "Languages the provider is trusted to recognise and speak."})
    openai_timeout = fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds one provider call may take, connecting included."})
