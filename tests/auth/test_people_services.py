"""Deleting a person reaches the other services (issue 45): what the memory service and the AI
core keep of the person is counted in the confirmation and erased with them, through each
service's `GET/DELETE /api/v1/people/{user_id}/data`; a service that cannot be reached refuses the
deletion before anything is deleted."""
from __future__ import annotations

import psycopg2

from gateway.app import create_app
from gateway.context import get_context
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.ai_core.store import record_tool_call
from plugins.auth import AuthPlugin, TokensPlugin, tokens_plugin
from plugins.memory import plugin as memory_plugin
from plugins.memory import proxy_plugin
from plugins.sessions import SessionsPlugin
from tests.ai_core.conftest import SERVICE
from tests.memory.conftest import url_of

from .people_support import API, admin_token, bearer, person_with_login
from .test_people import error_of


def rows(database_url: str, sql: str) -> dict:
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute(sql)
        found = dict(cursor.fetchall())
    connection.close()
    return found


async def services(aiohttp_client, make_config, database_url):
    memory = await aiohttp_client(create_app("memory-service", make_config({"database.url": database_url}),
                                             plugins=[tokens_plugin, memory_plugin]))
    ai_core = await aiohttp_client(create_app("ai-core", make_config({"database.url": database_url}),
                                              plugins=[tokens_plugin, ai_core_plugin]))
    return memory, ai_core


def gateway(auth_config, memory_url: str, ai_core_url: str):
    config = auth_config({"peers.memory_service_url": memory_url, "peers.ai_core_url": ai_core_url})
    return create_app("gateway-test", config, plugins=[TokensPlugin(), AuthPlugin(), SessionsPlugin(),
                                                       proxy_plugin, ai_core_client_plugin])


async def test_deleting_a_person_erases_their_memories_and_tool_calls_in_the_other_services(
        aiohttp_client, make_config, auth_config, database_url):
    memory, ai_core = await services(aiohttp_client, make_config, database_url)
    client = await aiohttp_client(gateway(auth_config, url_of(memory), url_of(ai_core)))
    admin = await admin_token(client)
    for name in ("wes", "xia"):
        await person_with_login(client, admin, name)
        remembered = await memory.post("/api/v1/memories", headers=SERVICE, json={
            "user_id": f"user_{name}", "content": f"{name} is allergic to peanuts", "category": "health"})
        assert remembered.status == 201, await remembered.text()
        await record_tool_call(get_context(ai_core.app).db, {
            "call_id": f"call_{name}", "tool_name": "get_time", "arguments": {}, "result": {"time": "now"},
            "error": None, "status": "ok", "duration_ms": 1.0, "session_id": None, "user_id": f"user_{name}",
            "model": None})

    # A person's token cannot reach a service's person data: only the service credential.
    _, login = await person_with_login(client, admin, "yan")
    await error_of(await memory.get(f"{API}/people/user_wes/data", headers=bearer(login["token"])),
                   403, "forbidden")
    counted = await memory.get(f"{API}/people/user_wes/data", headers=SERVICE)
    assert (await counted.json()) == {"user_id": "user_wes", "counts": {"memories": 1, "thinking_entries": 0}}

    asked = await error_of(await client.delete(f"{API}/admin/users/user_wes", headers=bearer(admin)),
                           409, "confirmation_required")
    assert asked["counts"]["memories"] == 1 and asked["counts"]["tool_calls"] == 1
    assert asked["counts"]["confirmations"] == 0 and asked["counts"]["thinking_entries"] == 0
    one = await (await client.get(f"{API}/admin/users/user_wes", headers=bearer(admin))).json()
    assert one["counts"]["memories"] == 1

    deleted = await client.delete(f"{API}/admin/users/user_wes?confirm=true", headers=bearer(admin))
    assert deleted.status == 200, await deleted.text()
    assert (await deleted.json())["counts"]["tool_calls"] == 1

    assert rows(database_url, "SELECT user_id, count(*) FROM memories GROUP BY user_id") == {"user_xia": 1}
    assert rows(database_url, "SELECT user_id, count(*) FROM ai_tool_calls GROUP BY user_id") == {"user_xia": 1}
    # The memory's vector went too: a search by meaning finds nothing of wes.
    found = await memory.get("/api/v1/memories/search", headers=SERVICE,
                             params={"user_id": "user_wes", "q": "peanuts allergy"})
    assert found.status == 200, await found.text()
    assert (await found.json())["memories"] == []
    again = await (await memory.get(f"{API}/people/user_wes/data", headers=SERVICE)).json()
    assert again["counts"] == {"memories": 0, "thinking_entries": 0}


async def test_a_service_out_of_reach_refuses_the_deletion_before_anything_goes(
        aiohttp_client, make_config, auth_config, database_url, unused_tcp_port):
    memory, _ = await services(aiohttp_client, make_config, database_url)
    client = await aiohttp_client(gateway(auth_config, url_of(memory), f"http://127.0.0.1:{unused_tcp_port}"))
    admin = await admin_token(client)
    await person_with_login(client, admin, "zed")
    remembered = await memory.post("/api/v1/memories", headers=SERVICE, json={
        "user_id": "user_zed", "content": "zed likes tea", "category": "preference"})
    assert remembered.status == 201, await remembered.text()

    await error_of(await client.delete(f"{API}/admin/users/user_zed?confirm=true", headers=bearer(admin)),
                   502, "ai_core_unreachable")
    assert rows(database_url, "SELECT user_id, count(*) FROM memories GROUP BY user_id") == {"user_zed": 1}
    people = await (await client.get(f"{API}/admin/users", headers=bearer(admin))).json()
    zed = next(person for person in people["users"] if person["username"] == "zed")
    assert zed["disabled"] is False  # nothing was done: the administrator can try again later

