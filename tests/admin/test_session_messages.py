"""`GET /api/v1/admin/sessions/{id}/messages?user_id=`: any user's stored conversation, for the
console's Sessions panel (session ids are per owner, so the owner is named)."""
from __future__ import annotations

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from plugins.admin import plugin as admin_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.contract import CONVERSATIONS
from tests.admin.conftest import error_of
from tests.support.servers import free_port


async def test_the_administrator_reads_any_users_session_history(aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url, "peers.ai_core_url": f"http://127.0.0.1:{free_port()}"})
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin, admin_plugin])
    client = await aiohttp_client(app)
    context = get_context(app)
    tokens = context.contracts.require(TOKENS)
    admin = {"Authorization": f"Bearer {tokens.issue_access(Identity('admin', 'admin', is_admin=True))[0]}"}
    alice = {"Authorization": f"Bearer {tokens.issue_access(Identity('alice', 'alice'))[0]}"}
    conversations = context.contracts.require(CONVERSATIONS)
    await conversations.create_session("alice", "kitchen", title="Kitchen")
    for role, content in [("user", "what is for dinner?"), ("assistant", "Pasta."), ("user", "thanks")]:
        await conversations.add_message("kitchen", "alice", role, content)

    page = await client.get("/api/v1/admin/sessions/kitchen/messages", headers=admin,
                            params={"user_id": "alice", "limit": "2"})
    assert page.status == 200
    body = await page.json()
    assert [(m["role"], m["content"]) for m in body["messages"]] == [("user", "what is for dinner?"), ("assistant", "Pasta.")]
    assert body["limit"] == 2 and body["offset"] == 0
    rest = await (await client.get("/api/v1/admin/sessions/kitchen/messages", headers=admin,
                                   params={"user_id": "alice", "offset": "2"})).json()
    assert [m["content"] for m in rest["messages"]] == ["thanks"]

    await error_of(await client.get("/api/v1/admin/sessions/kitchen/messages", headers=admin,
                                    params={"user_id": "bob"}), 404, "session_not_found")
    await error_of(await client.get("/api/v1/admin/sessions/kitchen/messages", headers=admin), 400, "validation_error")
    await error_of(await client.get("/api/v1/admin/sessions/kitchen/messages", headers=alice,
                                    params={"user_id": "alice"}), 403, "admin_only")
