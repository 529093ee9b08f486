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
from .contract import ChatEvent, ToolFailed, ToolProgressEvent, ToolStatus

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

    async def progress(self, fraction: float, message: str = "") -> None:
        if self._emit is not None:
            await self._emit(progress_event(self.tool_name, "running", fraction, message))

    async def ask_gateway(self, method: str, path: str, *, params: dict | None = None,
                          body: dict | None = None) -> Any:
        """The gateway's JSON answer to one of its endpoints, asked for this call's user (peer.py)."""
        if self._gateway is None:
            raise ToolFailed("the gateway cannot be asked from here")
        return await self._gateway.request(method, path, acting_for=self.user_id, params=params, body=body)


Handler = Callable[[dict, ToolCallContext], Awaitable[Any]]


@dataclass
class Tool:
    """A tool a model may call and the offline agent may choose.

    `examples` maps a language (`en`, `zh`) to phrases that ask for this tool; the offline agent
    matches a person's words against them. `parse_arguments(text)` turns such words into
    arguments; `summarize(result, language)` turns the result into a sentence for a person."""
    name: str
    description: str
    parameters: dict
    handler: Handler
    examples: dict[str, list[str]] = field(default_factory=dict)
    parse_arguments: Callable[[str], dict] | None = None
    summarize: Callable[[Any, str], str] | None = None
    owner: str = ""

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
    def __init__(self):
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered by both "
                             f"{self._tools[tool.name].owner!r} and {tool.owner!r}")
        if not tool.name.replace("_", "").replace("-", "").isalnum() or len(tool.name) > 64:
            raise ValueError(f"tool name {tool.name!r}: use letters, digits, _ and - (at most 64)")
        self._tools[tool.name] = tool

    def add(self, name: str, description: str, parameters: dict, handler: Handler, *,
            owner: str = "", **extra) -> Tool:
        """Register a tool without importing this module: `context.contracts.require(TOOLS).add(...)`."""
        tool = Tool(name, description, parameters, handler, owner=owner, **extra)
        self.register(tool)
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        return [self._tools[name] for name in sorted(self._tools)]

    def schemas(self) -> list[dict]:
        return [tool.schema() for tool in self.all()]

    def names_by_owner(self, default_owner: str) -> dict[str, list[str]]:
        """Tool names by the plugin that added each (the service's introspection, `tools`)."""
        owners: dict[str, list[str]] = {}
        for tool in self.all():
            owners.setdefault(tool.owner or default_owner, []).append(tool.name)
        return owners

    def describe(self) -> list[dict]:
        return [{"name": t.name, "description": t.description, "parameters": t.parameters,
                 "examples": t.examples, "owner": t.owner} for t in self.all()]


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

    def __init__(self, registry: ToolRegistry, context, timeout: float, gateway: "GatewayPeer | None" = None):
        self.registry = registry
        self.context = context
        self.timeout = timeout
        self.gateway = gateway

    async def run(self, name: str, raw_arguments: str | dict, *, user_id: str, session_id: str | None,
                  model: str | None, emit: Emit | None, call_id: str | None = None) -> ToolOutcome:
        call_id = call_id or f"call_{uuid.uuid4().hex[:16]}"
        started = time.monotonic()
        arguments: dict = {}

        async def send(event: ToolProgressEvent) -> None:
            if emit is not None:
                await emit({**event, "call_id": call_id})

        await send(progress_event(name, "started", 0.0, f"calling {name}"))
        tool = self.registry.get(name)
        error: str | None = None
        result: Any = None
        try:
            if tool is None:
                raise ToolFailed(f"no tool named {name!r}")
            if isinstance(raw_arguments, dict):
                arguments = raw_arguments
            else:
                try:
                    arguments = json.loads(raw_arguments or "{}")
                except ValueError:
                    raise ToolFailed(f"the arguments are not JSON: {raw_arguments[:200]!r}") from None
                if not isinstance(arguments, dict):
                    raise ToolFailed("the arguments must be a JSON object")
            missing = [key for key in tool.parameters.get("required", ()) if key not in arguments]
            if missing:
                raise ToolFailed(f"missing required argument(s): {', '.join(missing)}")
            call = ToolCallContext(user_id, session_id, name, self.context, send, self.gateway)
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
        await send(progress_event(name, status, 1.0, error or f"{name} finished"))
        try:
            await store.record_tool_call(self.context.db, {
                "call_id": call_id, "tool_name": name, "arguments": arguments, "result": result,
                "error": error, "status": status, "duration_ms": duration_ms,
                "session_id": session_id, "user_id": user_id, "model": model})
        except Exception:
            log.exception("could not record the call %s of %s", call_id, name)
        return ToolOutcome(call_id, error is None, result, error)
