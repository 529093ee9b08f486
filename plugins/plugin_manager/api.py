"""The plugin manager's endpoints (docs/plugin-manager.md)."""
from __future__ import annotations

from aiohttp import web

from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.validation import parse_body

from .manager import Manager
from .schemas import InstalledPluginOut, PluginChange, PluginChanged, PluginList

MANAGER = web.AppKey("plugin_manager.manager", Manager)
PLUGIN_NAME = {"name": {"type": "string", "minLength": 1}}

routes = web.RouteTableDef()


@routes.get("/api/v1/plugins", name="plugin_manager.list")
@api_doc("Every installed plugin, with what each service reports it loaded", responses={200: PluginList},
         auth="admin")
async def list_plugins(request: web.Request) -> web.Response:
    await require_admin(request)
    return web.json_response(await request.config_dict[MANAGER].plugins())


@routes.get("/api/v1/plugins/{name}", name="plugin_manager.detail")
@api_doc("One installed plugin", responses={200: InstalledPluginOut}, errors=(404,), auth="admin",
         path=PLUGIN_NAME)
async def get_plugin(request: web.Request) -> web.Response:
    await require_admin(request)
    return web.json_response(await request.config_dict[MANAGER].plugin(request.match_info["name"]))


async def change(request: web.Request, enable: bool) -> web.Response:
    await require_admin(request)
    body = await parse_body(request, PluginChange())
    return web.json_response(await request.config_dict[MANAGER].change(
        request.match_info["name"], body["service"], enable))


@routes.post("/api/v1/plugins/{name}/enable", name="plugin_manager.enable")
@api_doc("Load a plugin in a service from its next start, and ask the console to restart it",
         body=PluginChange, responses={200: PluginChanged}, errors=(404, 409), auth="admin", path=PLUGIN_NAME)
async def enable_plugin(request: web.Request) -> web.Response:
    return await change(request, True)


@routes.post("/api/v1/plugins/{name}/disable", name="plugin_manager.disable")
@api_doc("Leave a plugin out of a service from its next start, and ask the console to restart it",
         body=PluginChange, responses={200: PluginChanged}, errors=(404, 409), auth="admin", path=PLUGIN_NAME)
async def disable_plugin(request: web.Request) -> web.Response:
    return await change(request, False)
