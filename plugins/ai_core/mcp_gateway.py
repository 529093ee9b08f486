"""The gateway's side of MCP (plugin `mcp`, docs/mcp.md): the MCP server at `/mcp` and the
administrator's MCP servers at `/api/v1/admin/mcp-servers`, both kept by the AI core and
reached through the one peer transport (gateway/peers.py).

`/mcp` is the streamable-HTTP transport without sessions: the gateway authenticates the person
(`require_mcp_person`), then hands each JSON-RPC message to the AI core's `POST /api/v1/mcp`
naming that person, and passes the answer on (200 with a JSON-RPC response, or 202). There is
no stream of the server's own messages: GET (no route) answers 405, as the transport allows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from aiohttp import web
from marshmallow import fields, validate

from gateway.errors import Forbidden
from gateway.identity import Identity, require_admin
from gateway.openapi import api_doc
from gateway.peers import PeerContext, PeerClient, PeerTimeout
from gateway.plugin_settings import PluginSettings, setting
from gateway.plugins import Plugin, Registrar
from gateway.validation import load, read_json
from plugins.auth.contract import require_scope

from .mcp_servers_api import NAME_PATH, McpServerBody, McpServerChanged, McpServerList

routes = web.RouteTableDef()
ADMIN_PREFIX = "/api/v1/admin/mcp-servers"
AI_CORE_PREFIX = "/api/v1/mcp-servers"
POSITIVE = validate.Range(min=0, min_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class McpSettings(PluginSettings):
    """`[plugins.mcp]`: how long the gateway waits for the AI core."""
    call_timeout: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Seconds one MCP message may take in the AI core (a tool call: its tool_timeout and more)."}))
    admin_timeout: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds to wait for the AI core's table of MCP servers."}))


class AiCoreMcp(PeerClient):
    """The AI core, asked for MCP: its error answers passed on as it said them."""

    def __init__(self, context: PeerContext, read_timeout: float) -> None:
        super().__init__(context, "ai_core", service="AI core", error_prefix="ai_core",
                         timeout=PeerTimeout.from_config(context.config, read=read_timeout))


@dataclass(frozen=True)
class McpPeers:
    calls: AiCoreMcp  # MCP messages: as long as a tool call may take
    admin: AiCoreMcp  # the table of servers


MCP_PEERS = web.AppKey("mcp_peers", McpPeers)


def clients_of(request: web.Request) -> tuple[AiCoreMcp, AiCoreMcp]:
    peers = request.config_dict[MCP_PEERS]
    return peers.calls, peers.admin


async def require_mcp_person(request: web.Request) -> Identity:
    """The person an MCP client acts for: one check, so that the credentials /mcp takes (an
    access token, or a personal API key with the `mcp` scope) are decided in one place.
    The service credential names nobody here: refused."""
    identity = await require_scope(request, "mcp")
    if identity.kind == "service":
        raise Forbidden("The MCP server acts for a person: use a person's credential.", error_type="forbidden",
                        hint="Send a person's access token or API key as `Authorization: Bearer <token>`.")
    return identity


def as_answer(status: int, body: bytes, content_type: str) -> web.Response:
    if status == 202 or not body:
        return web.Response(status=status)
    return web.Response(status=status, body=body, content_type=content_type or "application/json")


@routes.post("/mcp", name="mcp.message")
@api_doc("The assistant as an MCP server (streamable HTTP): one JSON-RPC message, acting as the caller",
         body={"type": "object", "description": "A JSON-RPC 2.0 request or notification of MCP"},
         responses={200: {"type": "object", "description": "The JSON-RPC response"}, 202: None},
         errors=(502,), auth="user")
async def mcp_message(request: web.Request) -> web.Response:
    identity = await require_mcp_person(request)
    message = await read_json(request)
    calls, _ = clients_of(request)
    answer = await calls.request("POST", "/api/v1/mcp", params={"user_id": identity.user_id}, json_body=message)
    if answer.status >= 400:
        raise calls.refusal(answer)
    return as_answer(answer.status, answer.body, answer.content_type)


# ---------------------------------------------------------------- the administrator's servers

async def checked_body(request: web.Request) -> dict:
    """The administrator's body as sent, once it passed the schema here (the AI core checks it
    again: it keeps the table)."""
    await require_admin(request)
    body = await read_json(request)
    load(McpServerBody(), body)
    return cast(dict, body)


async def forward_admin(request: web.Request, method: str, path: str, body: dict | None = None) -> web.Response:
    await require_admin(request)
    _, admin = clients_of(request)
    answer = await admin.request(method, AI_CORE_PREFIX + path, json_body=body)
    if answer.status >= 400:
        raise admin.refusal(answer)
    return as_answer(answer.status, answer.body, answer.content_type)


@routes.get(ADMIN_PREFIX, name="mcp.servers")
@api_doc("MCP servers the assistant uses, each with its state (connected, its tools, last error)",
         responses={200: McpServerList}, errors=(502,), auth="admin")
async def list_servers(request: web.Request) -> web.Response:
    return await forward_admin(request, "GET", "")


@routes.post(ADMIN_PREFIX, name="mcp.server_add")
@api_doc("Add an MCP server (stdio command with arguments and environment, or streamable-HTTP URL with "
         "headers)", body=McpServerBody, responses={201: McpServerChanged}, errors=(409, 502), auth="admin")
async def add_server(request: web.Request) -> web.Response:
    return await forward_admin(request, "POST", "", await checked_body(request))


@routes.put(ADMIN_PREFIX + "/{name}", name="mcp.server_save")
@api_doc("Add or replace the MCP server of this name", body=McpServerBody, responses={200: McpServerChanged},
         errors=(502,), auth="admin", path={"name": NAME_PATH})
async def save_server(request: web.Request) -> web.Response:
    return await forward_admin(request, "PUT", "/" + request.match_info["name"], await checked_body(request))


@routes.delete(ADMIN_PREFIX + "/{name}", name="mcp.server_delete")
@api_doc("Remove an MCP server: its tools leave the assistant's", responses={200: McpServerChanged},
         errors=(404, 502), auth="admin", path={"name": NAME_PATH})
async def delete_server(request: web.Request) -> web.Response:
    return await forward_admin(request, "DELETE", "/" + request.match_info["name"])


class McpPlugin(Plugin):
    name = "mcp"
    depends = ("auth_tokens",)
    description = "The assistant as an MCP server at /mcp, and the administrator's MCP servers (in the AI core)"
    settings_class = McpSettings

    def setup(self, registrar: Registrar[McpSettings]) -> None:
        settings, context = registrar.settings, registrar.context
        registrar.app_state(MCP_PEERS, McpPeers(AiCoreMcp(context, settings.call_timeout),
                                                AiCoreMcp(context, settings.admin_timeout)))
        registrar.routes(routes)


plugin = McpPlugin()
