"""The MCP servers the assistant uses (docs/mcp.md): one connection per enabled server, kept
open by a loop of its own (one of the AI core's job group `mcp_connections`), whose tools join
the assistant's registry as `<server>__<tool>`.

Why a task per server: the SDK's transports are anyio context managers that must be entered
and left in one task; calls from turns reach the open session through its streams. A server
that dies (a stdio process that exits, an HTTP server that stops answering) is noticed by a
failed call or the periodic ping, its tools leave the registry, and the task connects again
after a back-off that doubles up to `RETRY_MAX` seconds."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, AsyncIterator

from gateway.fetch_policy import FetchPolicy
from gateway.jobs import JobGroup

from .contract import ToolFailed
from .mcp_egress import guarded_http_client
from .tools import Handler, Tool, ToolCallContext, ToolRegistry

log = logging.getLogger("plugins.ai_core.mcp")

SEPARATOR = "__"
TOOL_NAME_LIMIT = 64
RETRY_MIN = 1.0
RETRY_MAX = 60.0
PING_SECONDS = 15.0
CONNECT_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServerConfig:
    """One row of `ai_mcp_servers`, as the administrator saved it."""
    name: str
    transport: str  # "stdio" or "http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    allowed_tools: tuple[str, ...] | None = None  # None: every tool the server lists
    timeout_seconds: float = 30.0

    @classmethod
    def from_row(cls, row: dict) -> "ServerConfig":
        allowed = row.get("allowed_tools")
        return cls(row["name"], row["transport"], row.get("command") or "", tuple(row.get("args") or ()),
                   dict(row.get("env") or {}), row.get("url") or "", dict(row.get("headers") or {}),
                   bool(row.get("enabled", True)), None if allowed is None else tuple(allowed),
                   float(row.get("timeout_seconds") or 30.0))

    def allows(self, tool_name: str) -> bool:
        return self.allowed_tools is None or tool_name in self.allowed_tools


def result_for_model(result: Any) -> Any:
    """What the model reads of a tool's `CallToolResult`: its structured content when it has
    some, else its text; a result marked as an error is a `ToolFailed`."""
    texts = [getattr(item, "text", None) or f"[{getattr(item, 'type', 'content')}]" for item in result.content]
    if result.is_error:
        raise ToolFailed(" ".join(texts) or "the MCP server reported an error")
    if result.structured_content is not None:
        return result.structured_content
    return {"text": "\n".join(texts)}


class Connection:
    """One server: its state as the admin API shows it, and the loop (one of `jobs`) that keeps
    it connected."""

    def __init__(self, config: ServerConfig, registry: ToolRegistry, policy: FetchPolicy, jobs: JobGroup,
                 commands: tuple[str, ...] = ()):
        self.config, self.registry, self.policy, self.commands = config, registry, policy, commands
        self.jobs = jobs
        self.state = "disabled" if not config.enabled else "connecting"
        self.tools: list[str] = []
        self.last_error: str | None = None
        self.connected_at: str | None = None
        self.restarts = 0
        self.session: Any = None
        self._broken = asyncio.Event()
        self._started = False

    def start(self) -> None:
        if self.config.enabled and not self._started:
            self._started = True
            self.jobs.start(self.config.name, self._keep_connected())

    async def stop(self) -> None:
        if self._started:
            self._started = False
            await self.jobs.stop(self.config.name)
        self._unregister()

    def describe(self) -> dict:
        return {"state": self.state, "tools": list(self.tools), "last_error": self.last_error,
                "connected_at": self.connected_at, "restarts": self.restarts}

    async def _keep_connected(self) -> None:
        delay = RETRY_MIN
        while True:
            self.state, self._broken = "connecting", asyncio.Event()
            try:
                await self._serve_one_session()
                self.last_error = self.last_error or "the server closed the connection"
            except asyncio.CancelledError:
                raise
            except BaseException as error:  # noqa: BLE001 - anyio groups wrap what failed
                self.last_error = describe_error(error)
                log.warning("MCP server %s: %s", self.config.name, self.last_error)
            if self.connected_at is not None:
                delay = RETRY_MIN  # it worked for a while: start the back-off again
            self._unregister()
            self.session, self.connected_at, self.state = None, None, "failed"
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)
            self.restarts += 1

    async def _serve_one_session(self) -> None:
        from mcp import ClientSession

        async with self._transport() as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    await session.initialize()
                    listed = await session.list_tools()
                self.session = session
                self._register(listed.tools)
                self.state, self.last_error = "connected", None
                self.connected_at = datetime.now(timezone.utc).isoformat()
                await self._watch(session)

    async def _watch(self, session: Any) -> None:
        """Until a call finds the session broken or a ping goes unanswered."""
        while not self._broken.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PING_SECONDS):
                    await self._broken.wait()
            if self._broken.is_set():
                return
            async with asyncio.timeout(self.config.timeout_seconds):
                await session.send_ping()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.config.transport == "stdio":
            from mcp import StdioServerParameters

            if not command_allowed(self.config.command, self.commands):
                raise ToolFailed(f"{self.config.command!r} is not in [plugins.ai_core] mcp_commands")
            from mcp.client.stdio import stdio_client

            parameters = StdioServerParameters(command=self.config.command, args=list(self.config.args),
                                               env=self.config.env or None)
            async with stdio_client(parameters) as streams:
                yield streams[0], streams[1]
        else:
            from mcp.client.streamable_http import streamable_http_client

            async with guarded_http_client(self.policy, self.config.headers, self.config.timeout_seconds) as http:
                async with streamable_http_client(self.config.url, http_client=http) as streams:
                    yield streams[0], streams[1]

    def _register(self, listed: list[Any]) -> None:
        self._unregister()
        for tool in listed:
            name = f"{self.config.name}{SEPARATOR}{tool.name}"
            if not self.config.allows(tool.name) or self.registry.get(name) is not None:
                continue
            try:
                self.registry.register(Tool(
                    name, f"[{self.config.name}] {tool.description or tool.name}",
                    dict(tool.input_schema or {"type": "object", "properties": {}}),
                    self._handler(tool.name), owner=f"mcp:{self.config.name}"))
            except ValueError as error:  # a name the models cannot take: left out, said why
                log.warning("MCP server %s: tool %r left out: %s", self.config.name, tool.name, error)
                continue
            self.tools.append(name)

    def _unregister(self) -> None:
        for name in self.tools:
            self.registry.unregister(name)
        self.tools = []

    def _handler(self, tool_name: str) -> Handler:
        async def call(arguments: dict, _call: ToolCallContext) -> Any:
            session = self.session
            if session is None:
                raise ToolFailed(f"the MCP server {self.config.name!r} is not connected now")
            try:
                async with asyncio.timeout(self.config.timeout_seconds):
                    result = await session.call_tool(tool_name, arguments)
            except TimeoutError:
                raise ToolFailed(f"the MCP server {self.config.name!r} did not answer within "
                                 f"{self.config.timeout_seconds:g}s") from None
            except Exception as error:
                if not _is_tool_error(error):
                    self._broken.set()  # the connection itself failed: connect again
                raise ToolFailed(f"the MCP server {self.config.name!r} failed: {describe_error(error)}") from None
            return result_for_model(result)
        return call


def command_allowed(command: str, commands: tuple[str, ...]) -> bool:
    """Whether the operator's `mcp_commands` (empty: any) lets a stdio server start `command`."""
    return not commands or command in commands


def _is_tool_error(error: BaseException) -> bool:
    """An error answer of a live server (bad arguments, unknown tool), not a lost connection."""
    from mcp.shared.exceptions import MCPError

    code = getattr(getattr(error, "error", None), "code", None)
    return isinstance(error, MCPError) and code is not None and -32700 <= code <= -32600


def describe_error(error: BaseException) -> str:
    """One line for the admin API: the innermost error of an exception group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error) or error.__class__.__name__
    return text if len(text) <= 500 else text[:497] + "..."


class McpServers:
    """The connections of one AI core instance, following the table `ai_mcp_servers`."""

    def __init__(self, registry: ToolRegistry, policy: FetchPolicy, jobs: JobGroup,
                 commands: tuple[str, ...] = ()):
        self.registry, self.policy, self.jobs, self.commands = registry, policy, jobs, commands
        self.connections: dict[str, Connection] = {}
        self._lock = asyncio.Lock()

    async def follow(self, rows: list[dict]) -> None:
        """Connect what is new or changed, disconnect what left; unchanged servers stay connected."""
        wanted = {row["name"]: ServerConfig.from_row(row) for row in rows}
        async with self._lock:
            for name in list(self.connections):
                if name not in wanted or wanted[name] != self.connections[name].config:
                    await self.connections.pop(name).stop()
            for name, config in wanted.items():
                if name not in self.connections:
                    connection = Connection(config, self.registry, self.policy, self.jobs, self.commands)
                    self.connections[name] = connection
                    connection.start()

    async def close(self) -> None:
        await self.follow([])

    def state_of(self, name: str) -> dict:
        connection = self.connections.get(name)
        if connection is None:
            return {"state": "unknown", "tools": [], "last_error": None, "connected_at": None, "restarts": 0}
        return connection.describe()
