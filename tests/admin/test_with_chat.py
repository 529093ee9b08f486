"""The admin listing of live sessions and known clients with the real chat plugin: a device
connects to the WebSocket channel, the administrator sees it, notes it, and sees it leave."""
from __future__ import annotations

import asyncio

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from plugins.admin import plugin as admin_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.admin.conftest import error_of
from tests.support.servers import free_port
from plugins.auth.contract import TOKENS


async def eventually(check, timeout: float = 5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result or asyncio.get_running_loop().time() > deadline:
            return result
        await asyncio.sleep(0.05)


async def test_a_connected_device_is_listed_noted_and_gone(aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url, "peers.ai_core_url": f"http://127.0.0.1:{free_port()}",
                          "plugins.chat": {"sweep_interval": 0.5, "heartbeat": 5}})
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, chat_plugin,
                                                  ai_core_client_plugin, admin_plugin])
    client = await aiohttp_client(app)
    token = get_context(app).contracts.require(TOKENS).issue_access(Identity("admin", "admin", is_admin=True))[0]
    admin = {"Authorization": f"Bearer {token}"}

    ws = await client.ws_connect("/ws/chat", params={"token": token, "session_id": "s-admin-1",
                                                     "client_id": "phone-1", "device_name": "Phone"})

    async def listed():
        body = await (await client.get("/api/v1/admin/sessions", headers=admin)).json()
        return body if body["total"] else None

    sessions = await eventually(listed)
    assert sessions and sessions["sessions"][0]["session_id"] == "s-admin-1"
    state = sessions["sessions"][0]
    assert state["user_id"] == "admin" and state["device_count"] == 1 and state["turn_running"] is False
    assert state["devices"][0]["client_id"] == "phone-1" and state["devices"][0]["device_name"] == "Phone"

    detail = await (await client.get("/api/v1/admin/sessions/s-admin-1", headers=admin)).json()
    assert detail["session_id"] == "s-admin-1"
    active = await (await client.get("/api/v1/admin/sessions/active", headers=admin)).json()
    assert [s["session_id"] for s in active["users"]["admin"]] == ["s-admin-1"]

    clients = await (await client.get("/api/v1/admin/clients", headers=admin, params={"user_id": "admin"})).json()
    assert [(c["client_id"], c["online"]) for c in clients["clients"]] == [("phone-1", True)]
    response = await client.put("/api/v1/admin/clients/phone-1/note", headers=admin, json={"note": "desk phone"})
    assert await response.json() == {"status": "ok", "client_id": "phone-1", "note": "desk phone"}
    await error_of(await client.put("/api/v1/admin/clients/ghost/note", headers=admin, json={"note": "x"}),
                   404, "client_not_found")

    await ws.close()

    async def gone():
        body = await (await client.get("/api/v1/admin/sessions", headers=admin)).json()
        return body["total"] == 0

    assert await eventually(gone)
    await error_of(await client.get("/api/v1/admin/sessions/s-admin-1", headers=admin), 404, "session_not_found")
    clients = await (await client.get("/api/v1/admin/clients", headers=admin)).json()
    assert [(c["client_id"], c["note"], c["online"]) for c in clients["clients"]] == [("phone-1", "desk phone", False)]
