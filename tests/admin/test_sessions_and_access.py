"""Live sessions and known clients from a `presence` service, answers without one, and the
administrator-only rule on every admin route.

The chat plugin (which offers `presence` for real) was being written in parallel, so these
tests use a small plugin that implements the `presence` contract over in-memory data."""
from __future__ import annotations

import pytest

from gateway.plugins import Plugin
from tests.admin.conftest import error_of
from plugins.chat.contract import PRESENCE

SESSIONS = [
    {"session_id": "s1", "user_id": "user_alice", "title": "Shopping", "device_count": 2, "turn_running": True,
     "queue_length": 1, "last_activity": 1_700_000_000_000,
     "devices": [{"connection_id": "c1", "client_id": "phone-1", "device_name": "Phone", "user_agent": "app/1",
                  "connected_at": 1_699_999_000_000},
                 {"connection_id": "c2", "client_id": "desk-1", "device_name": "Desk", "user_agent": "app/1",
                  "connected_at": 1_699_999_500_000}]},
    {"session_id": "s2", "user_id": "user_bob", "title": "", "device_count": 1, "turn_running": False,
     "queue_length": 0, "last_activity": 1_700_000_500_000,
     "devices": [{"connection_id": "c3", "client_id": "web-1", "device_name": "Browser", "user_agent": "ff",
                  "connected_at": 1_700_000_400_000}]},
    {"session_id": "s3", "user_id": "user_alice", "title": "Work", "device_count": 1, "turn_running": False,
     "queue_length": 0, "last_activity": 1_699_000_000_000, "devices": []},
]


class MemoryPresence:
    def __init__(self):
        self.clients = {
            "phone-1": {"user_id": "user_alice", "client_id": "phone-1", "device_name": "Phone", "user_agent": "app/1",
                        "note": "", "last_seen": 1_700_000_000_000, "online": True},
            "web-1": {"user_id": "user_bob", "client_id": "web-1", "device_name": "Browser", "user_agent": "ff",
                      "note": "", "last_seen": 1_700_000_400_000, "online": False},
        }

    async def live_sessions(self):
        return [dict(s) for s in SESSIONS]

    async def session_state(self, session_id):
        return next((dict(s) for s in SESSIONS if s["session_id"] == session_id), None)

    async def known_clients(self, user_id=None):
        return [dict(c) for c in self.clients.values() if user_id is None or c["user_id"] == user_id]

    async def set_client_note(self, client_id, note):
        if client_id not in self.clients:
            return None
        self.clients[client_id]["note"] = note
        return dict(self.clients[client_id])


class PresencePlugin(Plugin):
    name = "test_presence"

    def setup(self, registrar):
        registrar.provide(PRESENCE, MemoryPresence())


@pytest.fixture
async def with_presence(make_gateway):
    return await make_gateway(PresencePlugin())


async def test_live_sessions(with_presence):
    gateway = with_presence
    body = await (await gateway.get("/api/v1/admin/sessions", headers=gateway.admin)).json()
    assert body["total"] == 3
    assert [s["session_id"] for s in body["sessions"]] == ["s2", "s1", "s3"]  # latest activity first
    assert body["sessions"][1] == SESSIONS[0]

    active = await (await gateway.get("/api/v1/admin/sessions/active", headers=gateway.admin)).json()
    assert {user: [s["session_id"] for s in states] for user, states in active["users"].items()} == {
        "user_bob": ["s2"], "user_alice": ["s1", "s3"]}
    assert active["total_users"] == 2 and active["total_sessions"] == 3

    detail = await gateway.get("/api/v1/admin/sessions/s1", headers=gateway.admin)
    assert await detail.json() == SESSIONS[0]
    await error_of(await gateway.get("/api/v1/admin/sessions/nope", headers=gateway.admin), 404, "session_not_found")


async def test_known_clients_and_notes(with_presence):
    gateway = with_presence
    body = await (await gateway.get("/api/v1/admin/clients", headers=gateway.admin)).json()
    assert body["total"] == 2
    alice = await (await gateway.get("/api/v1/admin/clients", headers=gateway.admin,
                                     params={"user_id": "user_alice"})).json()
    assert [c["client_id"] for c in alice["clients"]] == ["phone-1"] and alice["total"] == 1

    response = await gateway.put("/api/v1/admin/clients/phone-1/note", headers=gateway.admin,
                                 json={"note": "Alice's phone"})
    assert await response.json() == {"status": "ok", "client_id": "phone-1", "note": "Alice's phone"}
    alice = await (await gateway.get("/api/v1/admin/clients", headers=gateway.admin,
                                     params={"user_id": "user_alice"})).json()
    assert alice["clients"][0]["note"] == "Alice's phone"

    await error_of(await gateway.put("/api/v1/admin/clients/ghost/note", headers=gateway.admin, json={"note": "x"}),
                   404, "client_not_found")
    await error_of(await gateway.put("/api/v1/admin/clients/phone-1/note", headers=gateway.admin, json={"note": 5}),
                   400, "validation_error")
    await error_of(await gateway.put("/api/v1/admin/clients/phone-1/note", headers=gateway.admin, json={}),
                   400, "validation_error")


async def test_without_presence_the_lists_are_empty(gateway):
    assert await (await gateway.get("/api/v1/admin/sessions", headers=gateway.admin)).json() == {
        "sessions": [], "total": 0}
    active = await (await gateway.get("/api/v1/admin/sessions/active", headers=gateway.admin)).json()
    assert active["users"] == {}
    assert await (await gateway.get("/api/v1/admin/clients", headers=gateway.admin)).json() == {
        "clients": [], "total": 0}
    await error_of(await gateway.get("/api/v1/admin/sessions/s1", headers=gateway.admin), 404, "session_not_found")
    await error_of(await gateway.put("/api/v1/admin/clients/c/note", headers=gateway.admin, json={"note": "x"}),
                   404, "client_not_found")


ROUTES = [
    ("GET", "/api/v1/admin/sessions"), ("GET", "/api/v1/admin/sessions/active"), ("GET", "/api/v1/admin/sessions/s1"),
    ("GET", "/api/v1/admin/clients"), ("PUT", "/api/v1/admin/clients/phone-1/note"), ("GET", "/api/v1/admin/stats"),
    ("GET", "/api/v1/admin/sessions/s1/messages"),
    ("GET", "/api/v1/admin/models/providers"), ("POST", "/api/v1/admin/models/providers/p1"),
    ("DELETE", "/api/v1/admin/models/providers/p1"), ("GET", "/api/v1/admin/models/models"),
    ("POST", "/api/v1/admin/models/models/m1"), ("DELETE", "/api/v1/admin/models/models/m1"),
    ("GET", "/api/v1/admin/models/routing"), ("POST", "/api/v1/admin/models/routing/chat"),
    ("DELETE", "/api/v1/admin/models/routing/chat"), ("POST", "/api/v1/admin/models/health-check"),
    ("GET", "/api/v1/admin/models/fetch-models/p1"),
]


async def test_every_route_is_for_the_administrator_only(with_presence):
    gateway = with_presence
    registered = {(route.method, resource.canonical) for resource in gateway.app.router.resources()
                  for route in resource
                  if resource.canonical.startswith("/api/v1/admin") and route.method != "HEAD"}
    assert len(registered) == len(ROUTES)  # a new admin route must be added to this test
    body = {"note": "x", "provider": "p1", "base_url": "https://x.example", "name": "m1",
            "fallback_chain": ["m1"]}
    for method, path in ROUTES:
        kwargs = {"json": body} if method in ("POST", "PUT") else {}
        await error_of(await gateway.request(method, path, headers=gateway.alice, **kwargs), 403, "admin_only")
        await error_of(await gateway.request(method, path, **kwargs), 401, "unauthorized")
        forged = await gateway.request(method, path, headers={"Authorization": "Bearer forged"}, **kwargs)
        assert forged.status == 401
    # The note was not changed by the refused calls.
    clients = await (await gateway.get("/api/v1/admin/clients", headers=gateway.admin)).json()
    assert all(c["note"] == "" for c in clients["clients"])
