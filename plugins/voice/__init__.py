"""Voice: speech to text and text to speech (docs/voice.md).

- `voice_engines` (the voice service, port 8093; service.py): transcription of uploads and of
  WebSocket streams, speech synthesis, the voice list and status, with the engines of
  engines/ (offline Whisper, PocketSphinx, Piper and eSpeak NG; an OpenAI-compatible provider
  when configured; more through the `gateway.voice_engines` entry-point group).
- The gateway's voice endpoints and voice over the chat socket (gateway.py, speech.py)."""
