"""Apps for the sessions tests: the production factory with the real token plugin and the
sessions plugin, and bearer headers minted by the real `tokens` service."""
from __future__ import annotations

import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from plugins.auth import tokens_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.auth.contract import TOKENS
from plugins.sessions.contract import CONVERSATIONS

API = "/api/v1"
ALICE = Identity("user_alice", "alice", nickname="Alice")
BOB = Identity("user_bob", "bob", nickname="Bob")
ADMIN = Identity("admin", "admin", is_admin=True, nickname="Administrator")


def bearer(app, identity: Identity) -> dict:
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(identity)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def sessions_app(aiohttp_client, config):
    """(client, conversations service, headers by name)."""
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin])
    client = await aiohttp_client(app)
    headers = {name: bearer(app, identity) for name, identity in
               (("alice", ALICE), ("bob", BOB), ("admin", ADMIN))}
    return client, get_context(app).contracts.require(CONVERSATIONS), headers
