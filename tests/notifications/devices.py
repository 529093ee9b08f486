"""A WebSocket endpoint that registers a person's devices with the hub (with their client_id)
as the chat channel does, so that tests of notifications and reminders do not need the chat
plugin; and small helpers to wait for what the devices and the database see."""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from aiohttp import web

from gateway.context import get_context
from gateway.database import fetch_value
from gateway.identity import Identity, require_user
from gateway.plugins import Plugin
from plugins.auth.contract import TOKENS


class DevicePlugin(Plugin):
    name = "device_socket"
    depends = ("auth_tokens",)

    def setup(self, registrar):
        table = web.RouteTableDef()

        @table.get("/ws/device", name="device_socket")
        async def socket(request):
            user = await require_user(request)
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            hub = get_context(request).hub
            connection = await hub.register(ws, user.user_id, identity=user,
                                            client_id=request.query.get("client_id", ""),
                                            device_name=request.query.get("device", ""))
            try:
                async for _ in ws:
                    pass
            finally:
                await hub.unregister(connection)
            return ws

        registrar.routes(table)


def bearer(app: web.Application, identity: Identity) -> dict[str, str]:
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(identity)
    return {"Authorization": f"Bearer {token}"}


async def nothing_arrives(ws, seconds: float = 0.3) -> None:
    try:
        message = await ws.receive(timeout=seconds)
    except asyncio.TimeoutError:
        return
    raise AssertionError(f"unexpected frame {message.data if hasattr(message, 'data') else message}")


async def until(condition: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def device_away(app: web.Application, user_id: str, client_id: str) -> None:
    """Wait until the gateway has recorded that the device went away."""
    db = get_context(app).db

    async def away() -> bool:
        return await fetch_value(db, "SELECT NOT connected FROM notification_devices "
                                     "WHERE user_id = %s AND client_id = %s", (user_id, client_id)) is True
    await until(away)


async def device_known(app: web.Application, user_id: str, client_id: str) -> None:
    db = get_context(app).db

    async def known() -> bool:
        return await fetch_value(db, "SELECT connected FROM notification_devices "
                                     "WHERE user_id = %s AND client_id = %s", (user_id, client_id)) is True
    await until(known)
