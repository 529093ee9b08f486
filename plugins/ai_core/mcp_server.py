"""The assistant as an MCP server: the JSON-RPC methods of the Model Context Protocol over the
tools of this AI core, run for one person (docs/mcp.md).

Why here and not in the gateway: the tools (devices, reminders, automation, knowledge search,
memory, message search) live in this service's registry and run through its `ToolRunner`,
which records every call; each tool already asks the gateway for its person's data only. The
gateway's `/mcp` (mcp_gateway.py) authenticates the person and hands each message to
`POST /api/v1/mcp` here with the service credential naming that person.

Protocol: the streamable-HTTP transport in its JSON-answer form, without sessions: a request
is answered with one JSON-RPC response, a notification or a response with 202 and no body.
`server/discover` (the 2026 protocol's probe) is answered "method not found", which tells the
SDK's client to use the `initialize` handshake."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway import __version__
from gateway.context import get_context
from gateway.errors import BadRequest, Forbidden
from gateway.identity import Identity, require_user
from gateway.openapi import api_doc
from gateway.validation import read_json

from .api import ENGINE
from .engine import Engine
from .tools import Tool

routes = web.RouteTableDef()

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
MODEL_NAME = "mcp-client"  # the `model` of the tool-call records of calls made over MCP
INSTRUCTIONS = ("The tools of your personal assistant: your devices, reminders, automations, knowledge "
                "bases, memories and past messages. Every call acts as you and sees only your data.")


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def published_tools(engine: Engine) -> list:
    """The person's tools: every tool of the registry but those of the MCP servers the assistant
    itself uses (published again, they would lend the administrator's servers to every person)."""
    return [tool for tool in engine.registry.all() if not tool.owner.startswith("mcp:")]


def tool_entry(tool: Tool) -> dict:
    entry: dict[str, Any] = {"name": tool.name, "description": tool.description,
                             "inputSchema": tool.parameters or {"type": "object", "properties": {}}}
    if tool.topic.get("en"):
        entry["title"] = tool.topic["en"]
    if tool.effects is not None:  # it may open a door: a client should ask its person first
        entry["annotations"] = {"destructiveHint": True, "readOnlyHint": False}
    return entry


def initialize_result(params: dict) -> dict:
    requested = params.get("protocolVersion")
    version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    return {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "assistant", "version": __version__}, "instructions": INSTRUCTIONS}


async def call_tool(engine: Engine, user_id: str, params: dict) -> dict:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "tools/call needs a tool `name` and an object of `arguments`")
    if name not in {tool.name for tool in published_tools(engine)}:
        raise RpcError(INVALID_PARAMS, f"no tool named {name!r}")
    outcome = await engine.runner.run(name, arguments, user_id=user_id, session_id=None, model=MODEL_NAME,
                                      emit=None)
    result: dict[str, Any] = {"content": [{"type": "text", "text": outcome.for_model()}], "isError": not outcome.ok}
    if outcome.ok and isinstance(outcome.result, dict):
        result["structuredContent"] = outcome.result
    return result


async def answer(engine: Engine, user_id: str, message: dict) -> dict:
    """The result of one request, or RpcError."""
    method, params = message.get("method"), message.get("params") or {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object")
    if method == "initialize":
        return initialize_result(params)
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [tool_entry(tool) for tool in published_tools(engine)]}
    if method == "tools/call":
        return await call_tool(engine, user_id, params)
    raise RpcError(METHOD_NOT_FOUND, f"method {method!r} is not offered")


async def handle_message(engine: Engine, user_id: str, message: Any) -> dict | None:
    """The JSON-RPC response to `message`; None for a notification or a client's response."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_response(None, INVALID_REQUEST, "expected one JSON-RPC 2.0 message (an object)")
    if "method" not in message:
        return None  # a response to a request of ours: we send none, so nothing to match
    if "id" not in message:
        return None  # a notification (notifications/initialized, cancelled): nothing to answer
    request_id = message["id"]
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return error_response(None, INVALID_REQUEST, "id must be a string or a number")
    try:
        return {"jsonrpc": "2.0", "id": request_id, "result": await answer(engine, user_id, message)}
    except RpcError as error:
        return error_response(request_id, error.code, error.message)


def error_response(request_id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def person_of(identity: Identity, requested: str | None) -> str:
    """Whom the calls act for: the person a service names, or the caller themself (also an
    administrator: over MCP nobody acts for somebody else)."""
    if identity.kind == "service":
        if not requested:
            raise BadRequest("A service must name the person it acts for.", error_type="validation_error",
                             hint="Add the query parameter user_id.")
        return requested
    if requested and requested != identity.user_id:
        raise Forbidden("Over MCP you act only as yourself.", error_type="forbidden", hint="Leave out user_id.")
    return identity.user_id


@routes.post("/api/v1/mcp", name="ai_core.mcp")
@api_doc("One MCP (JSON-RPC) message for the person's tools; the gateway's /mcp forwards here",
         body={"type": "object"}, responses={200: {"type": "object"}, 202: None}, auth="user")
async def mcp_message(request: web.Request) -> web.Response:
    identity = await require_user(request)
    user_id = person_of(identity, request.query.get("user_id"))
    try:
        message = await read_json(request)
    except BadRequest:
        return web.json_response(error_response(None, PARSE_ERROR, "the body is not JSON"))
    reply = await handle_message(get_context(request).contracts.require(ENGINE), user_id, message)
    if reply is None:
        return web.Response(status=202)
    return web.json_response(reply)
