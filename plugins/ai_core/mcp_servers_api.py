"""The administrator's MCP servers, in the AI core (`/api/v1/mcp-servers`; the gateway publishes
them at `/api/v1/admin/mcp-servers`, mcp_gateway.py): saved in `ai_mcp_servers`, followed at
once by this instance's connections and within `SYNC_SECONDS` by every other instance's.

Secrets in `env` and `headers` are shown masked (`****` and the last four characters); a masked
value sent back unchanged keeps the stored one, as the model providers' API keys do."""
from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, AsyncIterator

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import Context, get_context
from gateway.contracts import ContractKey
from gateway.errors import BadRequest, Conflict, NotFound
from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.plugins import Registrar
from gateway.validation import parse_body

from . import mcp_store
from .mcp_client import McpServers, command_allowed
from .store import mask_key
from .tools import ToolRegistry

log = logging.getLogger("plugins.ai_core.mcp")
routes = web.RouteTableDef()
PREFIX = "/api/v1/mcp-servers"
SYNC_SECONDS = 5.0
# No "__" in a name: it separates the server from the tool in `<server>__<tool>`.
NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]|_(?!_)){0,23}$")
NAME_PATH = {"type": "string", "pattern": NAME_PATTERN.pattern}

# Internal to the ai_core package: the handlers find this instance's connections here.
MCP_SERVERS: ContractKey[McpServers] = ContractKey("ai_core.mcp_servers")

STRINGS = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=200)),
                      values=fields.String(validate=validate.Length(max=4000)),
                      load_default=dict, validate=validate.Length(max=64))


def url_or_empty(value: str) -> None:
    """An http(s) URL, or "" (a stdio server has none: what GET shows may be sent back)."""
    if value:
        validate.URL(schemes={"http", "https"}, require_tld=False)(value)
        if len(value) > 2000:
            raise marshmallow.ValidationError("at most 2000 characters")


class McpServerBody(marshmallow.Schema):
    name = fields.String(required=True, validate=validate.Regexp(NAME_PATTERN, error=(
        "1 to 24 lower-case letters, digits, '-' or single '_', starting with a letter or digit")))
    transport = fields.String(required=True, validate=validate.OneOf(["stdio", "http"]))
    command = fields.String(load_default="", validate=validate.Length(max=1000), metadata={
        "description": "stdio: the program to start (run without a shell)."})
    args = fields.List(fields.String(validate=validate.Length(max=4000)), load_default=list,
                       validate=validate.Length(max=64))
    env = STRINGS
    url = fields.String(load_default="", validate=url_or_empty, metadata={
        "description": "http: the streamable-HTTP endpoint, reached through the egress policy."})
    headers = fields.Dict(keys=fields.String(validate=validate.Regexp(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")),
                          values=fields.String(validate=validate.Regexp(r"^[^\r\n\x00]{0,4000}$")),
                          load_default=dict, validate=validate.Length(max=64))
    enabled = fields.Boolean(load_default=True)
    allowed_tools = fields.List(fields.String(validate=validate.Length(min=1, max=128)), load_default=None,
                                allow_none=True, validate=validate.Length(max=500), metadata={
                                    "description": "The server's tools the assistant may call; null: all."})
    timeout_seconds = fields.Float(load_default=30.0, validate=validate.Range(min=1, max=600), metadata={
        "description": "Seconds one call may take (the AI core's tool_timeout bounds it too)."})

    @marshmallow.validates_schema
    def _transport_fields(self, data: dict, **_: Any) -> None:
        if data.get("transport") == "stdio" and not data.get("command"):
            raise marshmallow.ValidationError("a stdio server needs its command", "command")
        if data.get("transport") == "http" and not data.get("url"):
            raise marshmallow.ValidationError("an http server needs its url", "url")


class McpServerState(marshmallow.Schema):
    state = fields.String(required=True, validate=validate.OneOf(
        ["connecting", "connected", "failed", "disabled", "unknown"]))
    tools = fields.List(fields.String(), required=True, metadata={"description": "`<server>__<tool>` names"})
    last_error = fields.String(required=True, allow_none=True)
    connected_at = fields.String(required=True, allow_none=True)
    restarts = fields.Integer(required=True)


class McpServer(McpServerBody):
    status = fields.Nested(McpServerState, required=True)


class McpServerList(marshmallow.Schema):
    servers = fields.List(fields.Nested(McpServer), required=True)
    total = fields.Integer(required=True)


class McpServerChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["created", "saved", "deleted"]))
    name = fields.String(required=True)


def masked(values: dict) -> dict:
    return {key: mask_key(value) for key, value in (values or {}).items()}


def kept_secrets(sent: dict, stored: dict) -> dict:
    """`sent`, where a value equal to the mask of the stored one keeps the stored value."""
    return {key: stored[key] if key in stored and value == mask_key(stored[key]) else value
            for key, value in sent.items()}


def shown(row: dict, servers: McpServers) -> dict:
    return {"name": row["name"], "transport": row["transport"], "command": row["command"],
            "args": list(row["args"] or []), "env": masked(row["env"]), "url": row["url"],
            "headers": masked(row["headers"]), "enabled": row["enabled"], "allowed_tools": row["allowed_tools"],
            "timeout_seconds": row["timeout_seconds"], "status": servers.state_of(row["name"])}


async def follow_table(context: Context) -> None:
    """This instance's connections, made to match the table now."""
    await context.contracts.require(MCP_SERVERS).follow(await mcp_store.list_servers(context.db))


@routes.get(PREFIX, name="ai_core.mcp_servers")
@api_doc("MCP servers the assistant uses, each with its state, tools and last error",
         responses={200: McpServerList}, errors=(503,), auth="admin")
async def list_mcp_servers(request: web.Request) -> web.Response:
    await require_admin(request)
    context = get_context(request)
    servers = context.contracts.require(MCP_SERVERS)
    listed = [shown(row, servers) for row in await mcp_store.list_servers(context.db)]
    return web.json_response({"servers": listed, "total": len(listed)})


async def _save(request: web.Request, name: str | None) -> web.Response:
    await require_admin(request)
    body = await parse_body(request, McpServerBody())
    if name is not None and body["name"] != name:
        raise BadRequest(f"The body names {body['name']!r}, the path {name!r}.", error_type="validation_error",
                         hint="Rename by deleting the server and adding it under the new name.")
    context = get_context(request)
    servers = context.contracts.require(MCP_SERVERS)
    if body["transport"] == "stdio" and not command_allowed(body["command"], servers.commands):
        raise BadRequest(f"{body['command']!r} may not be started as an MCP server here.",
                         error_type="mcp_command_not_allowed",
                         hint="The operator lists the programs in [plugins.ai_core] mcp_commands: "
                              + ", ".join(servers.commands))
    stored = next((row for row in await mcp_store.list_servers(context.db) if row["name"] == body["name"]), None)
    if stored is not None:
        body["env"] = kept_secrets(body["env"], stored["env"] or {})
        body["headers"] = kept_secrets(body["headers"], stored["headers"] or {})
    if not await mcp_store.save_server(context.db, body, create_only=name is None):
        raise Conflict(f"An MCP server named {body['name']!r} exists already.", error_type="mcp_server_exists",
                       hint=f"Change it with PUT {PREFIX}/{body['name']}.")
    await follow_table(context)
    return web.json_response({"status": "saved" if name else "created", "name": body["name"]},
                             status=200 if name else 201)


@routes.post(PREFIX, name="ai_core.mcp_server_add")
@api_doc("Add an MCP server (stdio command or streamable-HTTP URL)", body=McpServerBody,
         responses={201: McpServerChanged}, errors=(409, 503), auth="admin")
async def add_mcp_server(request: web.Request) -> web.Response:
    return await _save(request, None)


@routes.put(PREFIX + "/{name}", name="ai_core.mcp_server_save")
@api_doc("Add or replace the MCP server of this name", body=McpServerBody, responses={200: McpServerChanged},
         errors=(503,), auth="admin", path={"name": NAME_PATH})
async def save_mcp_server(request: web.Request) -> web.Response:
    return await _save(request, request.match_info["name"])


@routes.delete(PREFIX + "/{name}", name="ai_core.mcp_server_delete")
@api_doc("Remove an MCP server: its tools leave the assistant's", responses={200: McpServerChanged},
         errors=(404, 503), auth="admin", path={"name": NAME_PATH})
async def delete_mcp_server(request: web.Request) -> web.Response:
    await require_admin(request)
    name = request.match_info["name"]
    context = get_context(request)
    if not await mcp_store.delete_server(context.db, name):
        raise NotFound(f"No MCP server named {name!r}.", error_type="mcp_server_not_found",
                       hint=f"GET {PREFIX} lists them.")
    await follow_table(context)
    return web.json_response({"status": "deleted", "name": name})



def setup_mcp(registrar: Registrar, registry: ToolRegistry) -> None:
    """The AI core's side of MCP: the admin routes, this instance's connections (opened at
    start, closed at stop) and the sync that follows changes other instances saved."""
    from .mcp_egress import mcp_policy
    from .mcp_server import routes as server_routes

    context = registrar.context
    settings = registrar.settings
    connection_loops = registrar.job_group("mcp_connections", per="server")
    servers = McpServers(registry, mcp_policy(context.config, settings.mcp_hosts), connection_loops,
                         tuple(settings.mcp_commands))
    registrar.provide(MCP_SERVERS, servers)
    registrar.routes(routes)
    registrar.routes(server_routes)

    async def connections(context: Context) -> AsyncIterator[None]:
        try:
            await follow_table(context)
        except Exception:  # the database may come later: the sync tries again
            log.exception("could not read the MCP servers")
        try:
            yield
        finally:
            await servers.close()

    async def sync(context: Context) -> None:
        while True:
            await asyncio.sleep(SYNC_SECONDS)
            try:
                await follow_table(context)
            except Exception:
                log.exception("could not read the MCP servers")

    registrar.lifespan(connections)
    registrar.job("mcp_servers_sync", sync)
