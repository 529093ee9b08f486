"""Voice: the voice service (speech in and out), and in the gateway the voice endpoints, voice over
the chat socket and spoken replies (docs/voice.md)."""
