"""What the ai_core package offers other plugins:

- in the ai-core service, registering tools the models may call (`TOOLS`), what a tool's
  handler is given (`ToolCall`) and the failures it raises or meets (`ToolFailed`,
  `GatewayFailed`);
- in the ai-core service, the two hooks of a chat turn: providers of context put into the
  model's system message before the turn (`TURN_CONTEXT`), and listeners told after it ended
  (`TURN_FINISHED`). The AI core knows nothing of what they add or do (memories, for one);
- in the services that call the AI core (the gateway), the one client of it (`AI_CORE`): the
  streaming chat call, image descriptions and the model tables, with one error (`AiCoreError`).

The events of the streaming chat call are declared here once, for the AI core that writes them
and for the client that reads them. They are plain dicts at run time (a turn relays dozens a
second); the TypedDicts only tell the type checker and the reader their fields."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Awaitable, Callable, Literal, NotRequired, Protocol, TypedDict, Union

from gateway.contracts import ContractKey
from gateway.errors import ApiError
from gateway.peers import PeerFailed


# ---------------------------------------------------------------- a message's length

# The longest message a person may send (characters), at every door that takes one: the chat
# (`[plugins.chat] max_message_chars`), the AI core (`[plugins.ai_core] max_message_chars`), the
# webhooks (`[plugins.webhooks] max_message_chars`). Past it: 413 `message_too_long`.
DEFAULT_MAX_MESSAGE_CHARS = 32_000
MESSAGE_TOO_LONG = "message_too_long"


def message_too_long(length: int, limit: int, setting: str, what: str = "The message") -> ApiError:
    """The 413 answer for a message of `length` characters, past `limit` (named by `setting`)."""
    return ApiError(f"{what} is {length} characters long; at most {limit} are accepted.",
                    error_type=MESSAGE_TOO_LONG, status=413,
                    hint=f"Send a shorter message, or split it. Operators: {setting}.")


# ---------------------------------------------------------------- tools (ai-core service)

class ToolFailed(Exception):
    """Raised by a tool handler for a failure the model (or the person) should read as is."""


class GatewayFailed(PeerFailed, ToolFailed):
    """`ToolCall.ask_gateway` could not reach the gateway, or the gateway refused: the core's one
    error of a call to another service (`PeerFailed`), and a tool failure the model reads.
    `peer_status` is the gateway's HTTP status and `error_type` its errorType (both None when it
    could not be reached), so a tool can turn an expected refusal (a 404, say) into an answer.
    `status` is the same as `peer_status` here (tools of other distributions read it)."""

    def __init__(self, message: str, status: int | None = None, error_type: str | None = None):
        super().__init__(message, peer_status=status)
        self.status = status  # type: ignore[assignment]
        self.error_type = error_type  # type: ignore[assignment]  # None: not reached


class ToolCall(Protocol):
    """What a tool handler knows about the call it serves (`handler(arguments, call)`)."""
    user_id: str
    session_id: str | None
    tool_name: str
    context: Any  # the ai-core service's shared Context: db, http, config, contracts
    language: str  # the person's (`en`, `zh`): write `progress` messages in it

    async def progress(self, fraction: float, message: str = "") -> None:
        """A `tool_progress` event with status `running`; `message` is shown to the person, in
        their words and `language` (never the tool's or an argument's name)."""
        ...

    async def ask_gateway(self, method: str, path: str, *, params: dict | None = None,
                          body: dict | None = None) -> Any:
        """The gateway's decoded JSON answer to one of its endpoints, asked for the call's
        person; GatewayFailed when it cannot be reached or answers an error."""
        ...


async def gateway_offers(call: ToolCall, path: str, params: dict | None = None) -> bool:
    """Whether the gateway answers `GET path` for the call's person: False when it cannot be
    reached or answers 404 (it runs no such feature). A tool's `available` check, so that help
    lists only what works now."""
    try:
        await call.ask_gateway("GET", path, params=params)
    except GatewayFailed as failure:
        return failure.peer_status not in (None, 404)
    return True


@dataclass(frozen=True)
class Effect:
    """What one call of a tool would do to the person's world, when it matters: `kind` names it
    as the confirmation rules do (`<class>.<action>`: `lock.unlock`, `cover.open`,
    `memory.delete`, `automation.http`...; `[plugins.ai_core] confirm_effects` lists the kinds
    that wait for the person's yes), `words` says it exactly, per language, as an imperative
    the person confirms ("Unlock the front door lock", "解锁前门智能门锁")."""
    kind: str
    words: dict[str, str]


# async effects(arguments, call) -> the effects this call would have (none: harmless). A tool
# declares it (`effects=` of `TOOLS.add`) when some of its calls are hard to undo; it runs before
# the call and must not change anything.
EffectsOf = Callable[[dict, ToolCall], Awaitable[list[Effect]]]


class Tools(Protocol):
    def add(self, name: str, description: str, parameters: dict,
            handler: Callable[..., Awaitable[Any]], *, owner: str = "", **extra: Any) -> Any:
        """Register a tool the models may call: `parameters` is its JSON schema, `handler(arguments,
        call)` runs it. `extra`: the offline agent's `examples`, `parse_arguments`, `summarize`,
        what a person reads per language — `topic`, `help` (things to say) and `progress` —
        and `effects` (an `EffectsOf`: the calls that wait for the person's confirmation; see
        docs/ai-core.md, "Tools", "What a person reads", "Confirmation")."""
        ...


TOOLS: ContractKey[Tools] = ContractKey("ai_core.tools", "tools the models may call")


# ---------------------------------------------------------------- the hooks of a chat turn (ai-core service)

class ContextBlock(TypedDict):
    """Text a provider adds to the model's system message: a heading and its lines (each shown
    as "- line"). Providers should keep it short: the AI core cuts what exceeds its budget."""
    title: str
    lines: list[str]


# async provider(user_id, session_id, text) -> blocks. `text` is the person's words of this turn.
TurnContextProvider = Callable[[str, "str | None", str], Awaitable[list[ContextBlock]]]


class TurnContext(Protocol):
    def add(self, name: str, provider: TurnContextProvider) -> None:
        """Before each chat turn answered by a model (purpose `chat`, both doors; not the
        offline agent, not the work of other purposes), `provider` is asked for blocks, all
        providers at once, each within `[plugins.ai_core] turn_context_timeout`; one that fails
        or is late is skipped with a log line and the turn goes on without it."""
        ...


@dataclass(frozen=True)
class FinishedTurn:
    """A chat turn that ended with an answer (by a model or the offline agent)."""
    user_id: str
    session_id: str | None
    user_text: str          # the person's words of this turn
    reply_text: str         # the whole answer
    model: str              # the model that answered (`offline-agent` for the built-in agent)
    history: list[dict] = field(default_factory=list)  # the earlier turns given with it, [{role, content}]
    user_message_id: str | None = None   # the stored ids, when the caller named them
    reply_message_id: str | None = None


TurnFinishedListener = Callable[[FinishedTurn], Awaitable[None]]


class TurnFinished(Protocol):
    def add(self, name: str, listener: TurnFinishedListener) -> None:
        """After each chat turn with an answer, `listener(turn)` runs as a background job of the
        AI core's scheduler: it never delays or fails the turn (an exception is logged)."""
        ...


TURN_CONTEXT: ContractKey[TurnContext] = ContractKey("ai_core.turn_context",
                                                     "context blocks for the model before each chat turn")
TURN_FINISHED: ContractKey[TurnFinished] = ContractKey("ai_core.turn_finished",
                                                       "listeners told after each chat turn")


# ---------------------------------------------------------------- the streaming chat call

class HistoryItem(TypedDict):
    role: Literal["user", "assistant", "system"]
    content: str


class ImageAttachment(TypedDict):
    type: NotRequired[Literal["image"]]
    url: str  # a data:image/...;base64, URI or an http(s) URL


class ChatRequest(TypedDict, total=False):
    """The body of `POST /api/v1/chat/stream`; `user_id` is required with the service credential."""
    user_id: str
    session_id: str | None
    text: str
    history: list[HistoryItem]
    mode: Literal["text", "voice_msg", "voice_assistant"]
    attachments: list[ImageAttachment]
    purpose: str
    use_tools: bool
    # The person's message this turn answers, as the gateway's chat names it (its client_msg_id):
    # what a turn-finished listener records as the source of what it learns.
    message_id: str | None


class DeltaEvent(TypedDict):
    """The next piece of answer text."""
    type: Literal["delta"]
    content: str


class ThinkingEvent(TypedDict):
    """Reasoning text from a model that streams it."""
    type: Literal["thinking"]
    status: str
    content: str


ToolStatus = Literal["started", "running", "completed", "failed"]


class ToolProgressEvent(TypedDict):
    """A tool call under way; `failed` carries the error in `message`."""
    type: Literal["tool_progress"]
    tool_name: str
    status: ToolStatus
    progress: float
    message: str
    call_id: NotRequired[str]


class SystemInfoEvent(TypedDict):
    """A notice for the person; `action` names what they can do about it, or is empty. With
    `action` `confirm`: a tool call waits for the person's yes (docs/ai-core.md, "Confirmation"):
    `effect` is what it would do, in their words, `confirmation_id` names it and `expires_at`
    (RFC 3339) is when it lapses."""
    type: Literal["system_info"]
    level: Literal["info", "warning", "error"]
    message: str
    action: str
    confirmation_id: NotRequired[str]
    effect: NotRequired[str]
    expires_at: NotRequired[str]


class ErrorEvent(TypedDict):
    """The turn failed; always the last event."""
    type: Literal["error"]
    error: str
    errorType: str
    model: str | None
    kind: NotRequired[str]


class ToolCallEvent(TypedDict):
    """A piece of a call of one of the client's functions (the OpenAI door only: the chat call
    offers none): the first names it (`id`, `name`), the next carry `arguments` fragments."""
    type: Literal["tool_call"]
    index: int
    id: str | None
    name: str | None
    arguments: str


class Fallback(TypedDict):
    model: str
    kind: str
    error: str


class DoneEvent(TypedDict):
    """The last event of a successful turn."""
    type: Literal["done"]
    text: str
    model: str
    finish_reason: str
    fallbacks: list[Fallback]
    usage: dict | None
    duration_ms: float


ChatEvent = Union[DeltaEvent, ThinkingEvent, ToolProgressEvent, SystemInfoEvent, ErrorEvent, DoneEvent,
                  ToolCallEvent]


# ---------------------------------------------------------------- the client (gateway side)

class ImageDescription(TypedDict):
    description: str
    model: str


class AiCoreError(PeerFailed):
    """A call to the AI core that did not succeed: the core's one error of a call to another
    service (`PeerFailed`). `error` and `error_type` say why, as a caller passes it on
    (`ai_core_unreachable` when the AI core could not be reached, stopped answering or refused
    our credential; the AI core's own errorType when it answered with an error;
    `ai_core_failed` when its answer could not be read); `status` is what an HTTP endpoint
    answers with. Unhandled in a handler, it renders as the spec's error body."""
    status = 502
    error_type = "ai_core_failed"


class StreamStop:
    """Ends a chat stream from outside while it is read (a person stopped the reply): the read
    waiting for the next event returns at once, the stream ends with no more events (no `done`),
    and its connection to the AI core is closed, which stops the model there. Asked before the
    stream's answer came, it ends the stream as soon as it does. Nothing is cancelled: the
    reader ends the turn in its own time, as with any stream that ended."""

    __slots__ = ("requested", "_close")

    def __init__(self) -> None:
        self.requested = False
        self._close: Callable[[], None] | None = None

    def request(self) -> None:
        if self.requested:
            return
        self.requested = True
        if self._close is not None:
            self._close()

    def on_request(self, close: Callable[[], None]) -> None:
        """The stream's own way to end its read; called at once when a stop was asked already."""
        self._close = close
        if self.requested:
            close()


class AiCore(Protocol):
    def stream_chat(self, body: ChatRequest, stop: StreamStop | None = None) -> AsyncGenerator[ChatEvent, None]:
        """The events of one turn, in order, as the AI core sends them (a `done` or an `error`
        event ends a complete stream); AiCoreError when the call fails. `stop`: ends the stream
        early from outside (it then simply ends)."""
        ...

    async def describe_image(self, image: str, *, prompt: str, user_id: str | None = None) -> ImageDescription:
        """The vision model's description of `image` (a data URI or an http(s) URL)."""
        ...

    # The model tables, for the administrator (docs/ai-core.md, "Providers, models, routing").
    async def providers(self) -> list[dict]: ...

    async def save_provider(self, name: str, base_url: str, api_key: str | None = None) -> None:
        """`api_key` None keeps the stored key."""
        ...

    async def delete_provider(self, name: str) -> None: ...

    async def models(self) -> list[dict]: ...

    async def save_model(self, model_id: str, fields: dict) -> None: ...

    async def delete_model(self, model_id: str) -> None: ...

    async def routes(self) -> list[dict]: ...

    async def save_route(self, purpose: str, fallback_chain: list[str], required: bool) -> None: ...

    async def delete_route(self, purpose: str) -> None: ...

    async def probe(self, provider: str, *, url: str | None = None, method: str = "GET",
                    payload: dict | None = None, timeout: float) -> dict:
        """One request to a provider made by the AI core with the provider's key (its model list
        by default): `{status, body, error, error_kind, latency_ms, url, ...}`; the provider's
        failure is in the answer, not raised."""
        ...


AI_CORE: ContractKey[AiCore] = ContractKey("ai_core.client", "the AI core: chat stream, images, model tables")


# ---------------------------------------------------------------- one answer for a purpose (ai-core service)

class Models(Protocol):
    async def complete(self, purpose: str, messages: list[dict], *, max_tokens: int | None = None,
                       temperature: float | None = None) -> str | None:
        """A whole answer (no tools, no events) from the first model of `purpose`'s route that
        answers — its routing rule, else the models tagged with the purpose, else the chat
        chain — for background work of a plugin in the ai-core service (memory extraction). None
        when no model is configured or every one failed (logged): the caller's fallback decides."""
        ...


MODELS: ContractKey[Models] = ContractKey("ai_core.models", "one whole model answer for a purpose")
