"""Apps for the people and API-key tests: the auth plugins, the sessions plugin (real data a
deletion must remove), and a probe plugin whose routes stand for other features: a route
outside /api/ that asks for a scope as /mcp will, and a WebSocket registered with the hub as
/ws/chat's connections are."""
from __future__ import annotations

import asyncio

from aiohttp import web

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import require_user
from gateway.plugins import Plugin
from plugins.auth import AuthPlugin, TokensPlugin
from plugins.auth.contract import PERSON_DATA, require_scope
from plugins.sessions import SessionsPlugin

from .conftest import ProbePlugin

API = "/api/v1"


class ScopedProbePlugin(Plugin):
    name = "scoped_probe"
    depends = ("auth_tokens",)

    def setup(self, registrar):
        routes = web.RouteTableDef()
        kept: dict[str, int] = {}

        @routes.post("/mcp-probe", name="scoped_probe_mcp")
        async def mcp(request):
            identity = await require_scope(request, "mcp")
            return web.json_response({"user_id": identity.user_id})

        @routes.get("/ws/held", name="scoped_probe_ws")
        async def held(request):
            identity = await require_user(request)
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            hub = get_context(request).hub
            connection = await hub.register(ws, identity.user_id, identity=identity)
            try:
                await ws.send_json({"connected": identity.user_id})
                async for _ in ws:
                    pass
            finally:
                await hub.unregister(connection)
            return ws

        @routes.post("/api/v1/probe/things", name="scoped_probe_things")
        async def add_thing(request):
            identity = await require_user(request)
            kept[identity.user_id] = kept.get(identity.user_id, 0) + 1
            return web.json_response({"things": kept[identity.user_id]})

        registrar.routes(routes)

        async def count(user_id: str) -> dict[str, int]:
            return {"things": kept.get(user_id, 0)}

        async def erase(user_id: str) -> None:
            await asyncio.sleep(0)
            kept.pop(user_id, None)

        registrar.context.contracts.require(PERSON_DATA).add("scoped_probe", count, erase)


def build_people_app(config) -> web.Application:
    return create_app("gateway-test", config, plugins=[TokensPlugin(), AuthPlugin(), SessionsPlugin(), ProbePlugin(),
                                                       ScopedProbePlugin()])


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


async def admin_token(client) -> str:
    from tests.conftest import TEST_ADMIN_PASSWORD

    answer = await client.post(f"{API}/auth/login", json={"username": "admin", "password": TEST_ADMIN_PASSWORD})
    assert answer.status == 200, await answer.text()
    return (await answer.json())["token"]


async def add_person(client, admin: str, username: str, **extra) -> dict:
    answer = await client.post(f"{API}/admin/users", json={"username": username, **extra}, headers=bearer(admin))
    assert answer.status == 201, await answer.text()
    return await answer.json()


async def sign_in(client, username: str, password: str) -> dict:
    answer = await client.post(f"{API}/auth/login", json={"username": username, "password": password})
    assert answer.status == 200, await answer.text()
    return await answer.json()


async def change_password(client, login: dict, current: str, new: str) -> dict:
    """The answer of POST /auth/password: the person's new tokens."""
    answer = await client.post(f"{API}/auth/password", headers=bearer(login["token"]),
                               json={"current_password": current, "new_password": new})
    assert answer.status == 200, await answer.text()
    return await answer.json()


async def person_with_login(client, admin: str, username: str) -> tuple[dict, dict]:
    """A person made by the administrator, signed in with their one-time password, who then chose
    their own (`person["password"]`): a login whose tokens open everything the person may."""
    person = await add_person(client, admin, username)
    first = await sign_in(client, username, person["one_time_password"])
    person["password"] = f"{username}-own-password"
    return person, await change_password(client, first, person["one_time_password"], person["password"])
