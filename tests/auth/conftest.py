"""Apps for the auth tests: the production factory with the auth plugins and a small probe
plugin whose routes use the identity helpers exactly as every other plugin does."""
from __future__ import annotations

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.identity import owner_for, require_admin, require_user
from gateway.plugins import Plugin
from plugins.auth import AuthPlugin, TokensPlugin

API = "/api/v1"


class ProbePlugin(Plugin):
    """Routes a feature plugin would have: any user, administrator only, whose data."""
    name = "probe"
    depends = ("auth_tokens",)

    def setup(self, registrar):
        routes = web.RouteTableDef()

        @routes.get("/api/v1/probe/me", name="probe_me")
        async def me(request):
            user = await require_user(request)
            return web.json_response({"user_id": user.user_id, "username": user.username,
                                      "nickname": user.nickname, "is_admin": user.is_admin,
                                      "kind": user.kind})

        @routes.get("/api/v1/probe/admin", name="probe_admin")
        async def admin_only(request):
            user = await require_admin(request)
            return web.json_response({"user_id": user.user_id})

        @routes.get("/api/v1/probe/data", name="probe_data")
        async def data(request):
            user = await require_user(request)
            return web.json_response({"owner": owner_for(user, request.query.get("user_id"))})

        @routes.get("/ws/probe", name="probe_ws")
        async def socket(request):
            user = await require_user(request)
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await ws.send_json({"user_id": user.user_id})
            await ws.close()
            return ws

        registrar.routes(routes)


def auth_settings(**overrides) -> dict:
    """Fast bcrypt and a rate limit the functional tests do not hit; rate tests lower it."""
    settings = {"plugins.auth": {"bcrypt_rounds": 4, "rate_limit_per_minute": 1000}}
    settings["plugins.auth"].update(overrides)
    return settings


def build_app(config, *, with_auth: bool = True) -> web.Application:
    plugins = [TokensPlugin(), ProbePlugin()]
    if with_auth:
        plugins.insert(1, AuthPlugin())
    return create_app("gateway-test", config, plugins=plugins)


@pytest.fixture
def auth_config(make_config, database_url):
    def build(extra: dict | None = None, **settings):
        overrides = {"database.url": database_url, **auth_settings(**settings)}
        overrides.update(extra or {})
        return make_config(overrides)
    return build


@pytest.fixture
async def client(aiohttp_client, auth_config):
    return await aiohttp_client(build_app(auth_config({"auth.registration_enabled": True})))


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}
