"""A chat turn as the AI core's callers hand it to the engine (`Turn`), what the engine answers
(`Outcome`), and the error of a turn that failed after output had gone out (`TurnFailed`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .contract import Fallback


@dataclass
class Turn:
    user_id: str
    session_id: str | None = None
    text: str = ""
    history: list[dict] = field(default_factory=list)
    mode: str = "text"
    images: list[str] = field(default_factory=list)
    # The OpenAI-compatible door passes the whole conversation instead of text and history.
    messages: list[dict] | None = None
    purpose: str = "chat"
    preferred_model: str | None = None
    use_tools: bool = True
    overrides: dict = field(default_factory=dict)
    message_id: str | None = None  # the person's message this turn answers, when the caller names it
    # False: no turn context before it and no turn-finished listeners after it (the OpenAI door's
    # requests, unless `door_remembers`): a relayed request is not the person's conversation.
    remembers: bool = True
    # The OpenAI door's client functions: offered to the model (with the assistant's own tools only
    # when `use_tools`), and the model's calls of them returned to the client, not run here.
    client_tools: list[dict] = field(default_factory=list)


@dataclass
class Outcome:
    text: str
    model: str
    finish_reason: str
    fallbacks: list[Fallback]
    usage: dict | None = None
    tool_calls: list[dict] = field(default_factory=list)  # the client's functions to call (OpenAI's shape)


class TurnFailed(Exception):
    """The turn ended in an error after output had been sent (already reported by an event)."""

