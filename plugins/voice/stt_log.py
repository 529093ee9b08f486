"""The `voice.stt` record: one per recognition (upload or stream), for the console's STT log.

It is one log line on the service's stderr, which the console's supervisor reads as the
service's log output: `... INFO voice.stt: {json}` (docs/voice.md, "The STT log"). What it
holds: when, who, language, audio seconds, engine, processing time, real-time factor, the text's
length and the text (the console's STT log shows the recognized text); never the audio."""
from __future__ import annotations

import json
import logging
import time

log = logging.getLogger("voice.stt")


def record_recognition(*, user_id: str, language: str, audio_ms: int, engine: str, processing_ms: float,
                       text: str, source: str, success: bool = True, error_type: str | None = None) -> dict:
    entry = {"time": round(time.time(), 3), "user_id": user_id, "language": language, "audio_ms": audio_ms,
             "engine": engine, "processing_ms": round(processing_ms, 1),
             "rtf": round(processing_ms / audio_ms, 3) if audio_ms else None,
             "text_length": len(text), "text": text, "source": source, "success": success,
             "error_type": error_type}
    log.info("%s", json.dumps(entry, ensure_ascii=False))
    return entry
