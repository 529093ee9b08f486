"""Tools: the registry plugins add to (offered as the `tools` service), and the runner that
calls one, reports its progress as `tool_progress` events and records every call."""
from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from . import store
from .contract import ChatEvent, EffectsOf, ToolFailed, ToolProgressEvent, ToolStatus
from .providers import CompletionAccumulator, Delta

from gateway.context import Context

if TYPE_CHECKING:
    from .peer import GatewayPeer

log = logging.getLogger("plugins.ai_core.tools")

Emit = Callable[[ChatEvent], Awaitable[None]]
EmitProgress = Callable[[ToolProgressEvent], Awaitable[None]]


@dataclass
class ToolCallContext:
    """What a handler knows about the call it serves, and how it reports progress (the
    `ToolCall` of contract.py)."""
    user_id: str
    session_id: str | None
    tool_name: str
    context: Any  # the gateway Context: db, http, config, contracts
    _emit: EmitProgress | None = None
    _gateway: "GatewayPeer | None" = None
    language: str = "en"  # the person's (`en`, `zh`): the words of `progress` messages

    async def progress(self, fraction: float, message: str = "") -> None:
        if self._emit is not None:
            await self._emit(progress_event(self.tool_name, "running", fraction, message))

    async def ask_gateway(self, method: str, path: str, *, params: dict | None = None,
                          body: dict | None = None) -> Any:
        """The gateway's JSON answer to one of its endpoints, asked for this call's user (peer.py)."""
        if self._gateway is None:
            raise ToolFailed("the gateway cannot be asked from here")
        return await self._gateway.ask(method, path, acting_for=self.user_id, params=params, body=body)


Handler = Callable[[dict, ToolCallContext], Awaitable[Any]]
# A tool's progress words: per language a template (or templates), or one function of both.
Progress = dict[str, str | list[str]] | Callable[[dict, str], str]

WORKING = {"en": "Working on it…", "zh": "正在处理…"}
DONE = {"en": "done", "zh": "完成"}
NOT_DONE = {"en": "that did not work", "zh": "没有成功"}


def phrase(words: dict[str, str], language: str) -> str:
    return words.get(language) or words["en"]


def progress_words(progress: Progress, arguments: dict, language: str) -> str:
    if callable(progress):
        try:
            return progress(arguments, language) or phrase(WORKING, language)
        except Exception:  # a plugin's wording must never fail the call
            log.exception("progress words of a tool failed")
            return phrase(WORKING, language)
    templates = progress.get(language) or progress.get("en") or []
    for template in [templates] if isinstance(templates, str) else templates:
        try:
            return template.format_map({key: value for key, value in arguments.items()
                                        if isinstance(value, (str, int, float)) and str(value).strip()})
        except (KeyError, IndexError, ValueError):
            continue  # a field this call did not give: the next template
    return phrase(WORKING, language)


@dataclass
class Tool:
    """A tool a model may call and the offline agent may choose.

    `examples` maps a language (`en`, `zh`) to phrases that ask for this tool; the offline agent
    matches a person's words against them. `parse_arguments(text)` turns such words into
    arguments; `summarize(result, language)` turns the result into a sentence for a person.

    What a person reads about the tool, in their language (the description and the parameters
    are for a model): `topic` names what it is about in help ("Lights and devices"; tools of
    the same topic are listed together), `help` gives two or three things to say, and
    `progress` what the progress line says while it runs — per language a template of the
    arguments ("Turning on {device}…"), a list of them (the first whose fields are all given),
    or a function `(arguments, language) -> str`.

    `effects(arguments, call)`: what a call would do that may need the person's yes first (see
    confirmation.py); a tool without it never waits, unless configuration names it."""
    name: str
    description: str
    parameters: dict
    handler: Handler
    examples: dict[str, list[str]] = field(default_factory=dict)
    parse_arguments: Callable[[str], dict] | None = None
    summarize: Callable[[Any, str], str] | None = None
    owner: str = ""
    topic: dict[str, str] = field(default_factory=dict)
    help: dict[str, list[str]] = field(default_factory=dict)
    progress: "Progress" = field(default_factory=dict)
    # Whether the tool can work now (its feature is reachable), asked before help lists it.
    available: "Callable[[ToolCallContext], Awaitable[bool]] | None" = None
    effects: "EffectsOf | None" = None

    def progress_words(self, arguments: dict, language: str) -> str:
        """What the person reads while this call runs (`progress`), else a general phrase."""
        return progress_words(self.progress, arguments, language)

    def schema(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


def progress_event(tool_name: str, status: ToolStatus, progress: float, message: str = "",
                   call_id: str = "") -> ToolProgressEvent:
    event: ToolProgressEvent = {"type": "tool_progress", "tool_name": tool_name, "status": status,
             "progress": round(max(0.0, min(1.0, progress)), 3), "message": message}
    if call_id:
        event["call_id"] = call_id
    return event


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas: list[dict] | None = None  # built once: every turn offers them

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered by both "
                             f"{self._tools[tool.name].owner!r} and {tool.owner!r}")
        if not tool.name.replace("_", "").replace("-", "").isalnum() or len(tool.name) > 64:
            raise ValueError(f"tool name {tool.name!r}: use letters, digits, _ and - (at most 64)")
        self._tools[tool.name] = tool
        self._schemas = None

    def add(self, name: str, description: str, parameters: dict, handler: Handler, *,
            owner: str = "", **extra: Any) -> Tool:
        """Register a tool without importing this module: `context.contracts.require(TOOLS).add(...)`."""
        tool = Tool(name, description, parameters, handler, owner=owner, **extra)
        self.register(tool)
        return tool

    def unregister(self, name: str) -> None:
        """Take a tool out (an MCP server's, when it disconnects); an unknown name is no error."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        return [self._tools[name] for name in sorted(self._tools)]

    def in_order(self) -> list[Tool]:
        """In the order they were registered: the order their owners want help to show them."""
        return list(self._tools.values())

    def schemas(self) -> list[dict]:
        """The tools as the models are offered them (one shared list: do not change it)."""
        if self._schemas is None:
            self._schemas = [tool.schema() for tool in self.all()]
        return self._schemas

    def names_by_owner(self, default_owner: str) -> dict[str, list[str]]:
        """Tool names by the plugin that added each (the service's introspection, `tools`)."""
        owners: dict[str, list[str]] = {}
        for tool in self.all():
            owners.setdefault(tool.owner or default_owner, []).append(tool.name)
        return owners

    def describe(self) -> list[dict]:
        return [{"name": t.name, "description": t.description, "parameters": t.parameters,
                 "examples": t.examples, "owner": t.owner, "topic": t.topic, "help": t.help} for t in self.all()]


def decode_arguments(raw_arguments: str | dict) -> tuple[dict, str | None]:
    """A call's arguments as a dict, and what is wrong with them (None: nothing)."""
    if isinstance(raw_arguments, dict):
        return raw_arguments, None
    try:
        arguments = json.loads(raw_arguments or "{}")
    except ValueError:
        return {}, f"the arguments are not JSON: {raw_arguments[:200]!r}"
    if not isinstance(arguments, dict):
        return {}, "the arguments must be a JSON object"
    return arguments, None


@dataclass
class ToolOutcome:
    call_id: str
    ok: bool
    result: Any
    error: str | None

    def for_model(self) -> str:
        if self.ok:
            return json.dumps(self.result, ensure_ascii=False, default=str)
        return json.dumps({"error": self.error}, ensure_ascii=False)


class ToolRunner:
    """Runs calls with a time limit, tells the caller how they go, and records each one."""

    # Seconds the tools' `available` checks may take together before help is composed.
    AVAILABLE_TIMEOUT = 3.0

    def __init__(self, registry: ToolRegistry, context: Context, timeout: float,
                 gateway: "GatewayPeer | None" = None) -> None:
        self.registry = registry
        self.context = context
        self.timeout = timeout
        self.gateway = gateway

    async def available(self, tools: list[Tool], *, user_id: str, session_id: str | None,
                        language: str) -> list[Tool]:
        """The tools that can work now: those without an `available` check, and those whose
        check says yes in time (one that fails or is late: not now)."""
        async def check(tool: Tool) -> bool:
            if tool.available is None:
                return True
            call = ToolCallContext(user_id, session_id, tool.name, self.context, None, self.gateway, language)
            try:
                async with asyncio.timeout(min(self.timeout, self.AVAILABLE_TIMEOUT)):
                    return bool(await tool.available(call))
            except Exception as error:  # TimeoutError included: not now
                log.info("tool %s is not available now: %r", tool.name, error)
                return False

        answers = await asyncio.gather(*(check(tool) for tool in tools))
        return [tool for tool, ok in zip(tools, answers) if ok]

    async def run(self, name: str, raw_arguments: str | dict, *, user_id: str, session_id: str | None,
                  model: str | None, emit: Emit | None, call_id: str | None = None,
                  language: str = "en") -> ToolOutcome:
        """`language`: the person's, for the words of the progress events (the tool's own
        `progress`); the tool's name travels in `tool_name` only, never in the words."""
        call_id = call_id or f"call_{uuid.uuid4().hex[:16]}"
        started = time.monotonic()
        arguments: dict = {}

        async def send(event: ToolProgressEvent) -> None:
            if emit is not None:
                await emit({**event, "call_id": call_id})

        tool = self.registry.get(name)
        error: str | None = None
        result: Any = None
        words = phrase(WORKING, language)
        try:
            arguments, arguments_error = decode_arguments(raw_arguments)
            if tool is not None:
                words = tool.progress_words(arguments, language)
            await send(progress_event(name, "started", 0.0, words))
            if tool is None:
                raise ToolFailed(f"no tool named {name!r}")
            if arguments_error:
                raise ToolFailed(arguments_error)
            missing = [key for key in tool.parameters.get("required", ()) if key not in arguments]
            if missing:
                raise ToolFailed(f"missing required argument(s): {', '.join(missing)}")
            call = ToolCallContext(user_id, session_id, name, self.context, send, self.gateway, language)
            async with asyncio.timeout(self.timeout):
                result = await tool.handler(arguments, call)
        except ToolFailed as failure:
            error = str(failure)
        except TimeoutError:
            error = f"the tool did not finish within {self.timeout:g}s"
        except Exception as failure:  # a plugin's bug must not end the turn
            log.exception("tool %s failed", name)
            error = f"{type(failure).__name__}: {failure}"
        duration_ms = (time.monotonic() - started) * 1000
        status: ToolStatus = "failed" if error else "completed"
        # The error is the model's to read (and the record's), not the person's: their line says
        # what was being done and whether it worked.
        await send(progress_event(name, status, 1.0, f"{words} {phrase(NOT_DONE if error else DONE, language)}"))
        try:
            await store.record_tool_call(self.context.db, {
                "call_id": call_id, "tool_name": name, "arguments": arguments, "result": result,
                "error": error, "status": status, "duration_ms": duration_ms,
                "session_id": session_id, "user_id": user_id, "model": model})
        except Exception:
            log.exception("could not record the call %s of %s", call_id, name)
        return ToolOutcome(call_id, error is None, result, error)


class ClientCalls:
    """The client's function calls of one model answer, relayed as they stream (`tool_call`
    events, numbered among the client's calls only: the assistant's own are run here)."""

    def __init__(self, names: set[str]):
        self.names = names
        self.index_of: dict[int, int] = {}  # the provider's index -> the client's

    async def relay(self, delta: Delta, accumulator: CompletionAccumulator, emit: Emit) -> None:
        call = accumulator.call_at(delta.tool_index)
        if call is None or call.name not in self.names:
            return
        if delta.tool_call_started:
            self.index_of[delta.tool_index] = len(self.index_of)
            await emit({"type": "tool_call", "index": self.index_of[delta.tool_index], "id": call.id,
                        "name": call.name, "arguments": ""})
        if delta.tool_arguments and delta.tool_index in self.index_of:
            await emit({"type": "tool_call", "index": self.index_of[delta.tool_index], "id": None,
                        "name": None, "arguments": delta.tool_arguments})
