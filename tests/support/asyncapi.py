"""Checks of the generated AsyncAPI documents: the document against the official AsyncAPI 3.0.0
JSON Schema (asyncapi_spec/), and each frame a real client received against the payload its
document gives for the frame's `type`."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema

SPEC = Path(__file__).parent / "asyncapi_spec" / "3.0.0-without-id.json"


@functools.cache
def _spec_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(SPEC.read_text()))


def validate_document(document: dict) -> None:
    """Raise jsonschema.ValidationError when `document` is not a valid AsyncAPI 3.0.0 document."""
    error = jsonschema.exceptions.best_match(_spec_validator().iter_errors(document))
    if error is not None:
        raise error


def payloads(document: dict, direction: str) -> dict[str, dict]:
    """`{type: payload schema}` of the frames sent by `direction` ("client" or "server")."""
    return {message["name"]: message["payload"] for key, message in document["components"]["messages"].items()
            if key.startswith(f"{direction}.")}


class FrameChecker:
    """Validates frames against a document's server (or client) payloads; remembers the types
    it saw so a test can tell that every documented type was exercised."""

    def __init__(self, document: dict, direction: str = "server"):
        self.document, self.direction = document, direction
        self.payloads = payloads(document, direction)
        self.seen: dict[str, int] = {}

    def check(self, frame: dict) -> None:
        kind = frame.get("type")
        assert kind in self.payloads, f"frame type {kind!r} is sent but not documented: {frame}"
        # The payload is resolved against the whole document: its $refs point into components.
        schema = {**self.document, "$ref": f"#/components/messages/{self.direction}.{kind}/payload"}
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(frame), key=lambda e: list(e.path))
        assert not errors, f"{kind!r} frame does not fit its documented schema: " \
                           f"{'; '.join(f'{list(e.path)}: {e.message}' for e in errors)}\n{frame}"
        self.seen[kind] = self.seen.get(kind, 0) + 1
