"""The soak's stub model (bench/stub_model.py), in a process of its own so that its CPU is not
the load generator's: REPLY in pieces of four words 30 ms apart, like a model's stream."""
from __future__ import annotations

from bench.stub_model import StubReply, serve_stub_model

REPLY = "Of course. Here is a short answer, streamed in a few pieces like a model would do it."
_WORDS = REPLY.split(" ")
SOAK_REPLY = StubReply(pieces=tuple(" ".join(_WORDS[start:start + 4]) + " " for start in range(0, len(_WORDS), 4)),
                       whole="Soak chat", model="soak-model", pause=0.03, id="soak")


def serve_model(port: int) -> None:
    """The soak's model on `port`: REPLY streamed, "Soak chat" when not (session titles)."""
    serve_stub_model(port, SOAK_REPLY)
