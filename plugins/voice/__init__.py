"""Voice: speech to text and text to speech (docs/voice.md).

- `voice_engines` (the voice service, port 8093; service.py): transcription of uploads and of
  WebSocket streams, speech synthesis, the voice list and status, with the engines of
  engines/ (offline Whisper, PocketSphinx, Piper and eSpeak NG; an OpenAI-compatible provider
  when configured; more through the `gateway.voice_engines` entry-point group).
- `voice` (the gateway; gateway.py): the voice endpoints passed on to the voice service
  (voice_service_client.py), voice over the chat socket (gateway_streams.py) and spoken replies
  (spoken.py, speech.py)."""
