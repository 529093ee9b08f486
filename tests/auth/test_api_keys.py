"""Personal API keys (docs/auth.md, "Personal API keys"): shown once and kept hashed, listed with
their last use, revoked by their owner or the administrator; a key is a bearer credential within
its scopes (`read`, `write` on the REST API, others asked by routes with `require_scope`), and a
revoked or expired key is refused at once on every instance."""
from __future__ import annotations

import psycopg2
import pytest

from tests.auth.people_support import API, add_person, admin_token, bearer, build_people_app, person_with_login


@pytest.fixture
async def one(aiohttp_client, auth_config):
    return await aiohttp_client(build_people_app(auth_config()))


async def create(client, token: str, **body) -> dict:
    answer = await client.post(f"{API}/auth/api-keys", json={"name": "script", **body}, headers=bearer(token))
    assert answer.status == 201, await answer.text()
    return await answer.json()


async def status_and_type(response) -> tuple[int, str | None]:
    body = await response.json()
    if response.status >= 400:
        assert body["error"] and body["hint"]
    return response.status, body.get("errorType")


async def test_a_key_is_shown_once_and_kept_hashed(one, database_url):
    admin = await admin_token(one)
    _, login = await person_with_login(one, admin, "mia")
    created = await create(one, login["token"], name="home automation", expires_in_days=30)
    assert created["key"].startswith("ak_" + created["id"] + "_") and len(created["key"]) > 50
    assert created["scopes"] == ["chat", "mcp", "read", "write"] and created["active"]
    assert created["expires_at"] and created["last_used_at"] is None
    listed = await (await one.get(f"{API}/auth/api-keys", headers=bearer(login["token"]))).json()
    assert listed["total"] == 1 and "key" not in listed["keys"][0]
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT key_hash FROM auth_api_keys")
        (stored,) = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM auth_api_keys WHERE auth_api_keys::text LIKE %s",
                       (f"%{created['key'].split('_', 2)[2]}%",))
        assert cursor.fetchone()[0] == 0 and len(stored) == 64
    connection.close()
    me = await one.get(f"{API}/probe/me", headers=bearer(created["key"]))
    assert (await me.json())["user_id"] == "user_mia"
    listed = await (await one.get(f"{API}/auth/api-keys", headers=bearer(login["token"]))).json()
    assert listed["keys"][0]["last_used_at"] is not None


async def test_scopes_bound_what_a_key_does(one):
    admin = await admin_token(one)
    _, login = await person_with_login(one, admin, "ned")
    read = (await create(one, login["token"], scopes=["read"]))["key"]
    write = (await create(one, login["token"], scopes=["write"]))["key"]
    mcp = (await create(one, login["token"], scopes=["mcp"]))["key"]
    zone = {"timezone": "Europe/Berlin"}
    assert (await one.get(f"{API}/profile", headers=bearer(read))).status == 200
    assert await status_and_type(await one.put(f"{API}/profile", json=zone, headers=bearer(read))) == \
        (403, "insufficient_scope")
    assert (await one.put(f"{API}/profile", json=zone, headers=bearer(write))).status == 200
    assert (await one.get(f"{API}/profile", headers=bearer(write))).status == 200  # write covers read
    assert await status_and_type(await one.get(f"{API}/profile", headers=bearer(mcp))) == (403, "insufficient_scope")
    # A route outside /api/ asks with require_scope, as /mcp does.
    assert (await one.post("/mcp-probe", headers=bearer(mcp))).status == 200
    assert await status_and_type(await one.post("/mcp-probe", headers=bearer(write))) == (403, "insufficient_scope")
    assert (await one.post("/mcp-probe", headers=bearer(login["token"]))).status == 200  # a sign-in token: all
    assert await status_and_type(await one.post("/mcp-probe")) == (401, "unauthorized")


async def test_a_key_cannot_make_keys_nor_change_the_password(one):
    admin = await admin_token(one)
    person, login = await person_with_login(one, admin, "ola")
    key = (await create(one, login["token"]))["key"]
    assert await status_and_type(await one.post(f"{API}/auth/api-keys", json={"name": "more"}, headers=bearer(key))) \
        == (403, "api_key_not_allowed")
    changed = await one.post(f"{API}/auth/password", headers=bearer(key),
                             json={"current_password": person["password"], "new_password": "stolen!"})
    assert await status_and_type(changed) == (403, "api_key_not_allowed")


async def test_bad_requests_get_the_error_body(one):
    admin = await admin_token(one)
    for body in ({}, {"name": ""}, {"name": "x", "scopes": ["root"]}, {"name": "x", "scopes": []},
                 {"name": "x", "scopes": ["read", "read"]}, {"name": "x", "expires_in_days": 0}):
        answer = await one.post(f"{API}/auth/api-keys", json=body, headers=bearer(admin))
        assert await status_and_type(answer) == (400, "validation_error"), body
    assert await status_and_type(await one.delete(f"{API}/auth/api-keys/0123456789abcdef", headers=bearer(admin))) \
        == (404, "api_key_not_found")
    for key in ("ak_", "ak_0123456789abcdef_nothing", "ak_" + "x" * 300):
        answer = await one.get(f"{API}/probe/me", headers=bearer(key))
        assert await status_and_type(answer) == (401, "invalid_api_key")


async def test_an_expired_key_is_refused(one, database_url):
    admin = await admin_token(one)
    _, login = await person_with_login(one, admin, "pia")
    created = await create(one, login["token"], expires_in_days=1)
    assert (await one.get(f"{API}/probe/me", headers=bearer(created["key"]))).status == 200
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("UPDATE auth_api_keys SET expires_at = now() - interval '1 second' WHERE id = %s",
                       (created["id"],))
    connection.close()
    assert await status_and_type(await one.get(f"{API}/probe/me", headers=bearer(created["key"]))) == \
        (401, "invalid_api_key")
    listed = await (await one.get(f"{API}/auth/api-keys", headers=bearer(login["token"]))).json()
    assert listed["keys"][0]["active"] is False and listed["keys"][0]["revoked_at"] is None


async def test_the_administrator_lists_and_revokes_every_key_on_every_instance(aiohttp_client, auth_config,
                                                                               redis_url, bus_prefix):
    config = auth_config({"bus.redis_url": redis_url, "bus.prefix": bus_prefix})
    first = await aiohttp_client(build_people_app(config))
    second = await aiohttp_client(build_people_app(config))
    admin = await admin_token(first)
    _, quinn = await person_with_login(first, admin, "quinn")
    _, rosa = await person_with_login(first, admin, "rosa")
    quinns = await create(first, quinn["token"], name="quinn's")
    rosas = await create(first, rosa["token"], name="rosa's")
    admins = await create(first, admin, name="the administrator's", scopes=["read"])
    assert (await (await second.get(f"{API}/probe/me", headers=bearer(admins["key"]))).json())["is_admin"]

    every = await (await second.get(f"{API}/auth/api-keys?all=true", headers=bearer(admin))).json()
    assert {key["name"] for key in every["keys"]} == {"quinn's", "rosa's", "the administrator's"}
    assert await status_and_type(await first.get(f"{API}/auth/api-keys?all=true", headers=bearer(quinn["token"]))) \
        == (403, "admin_only")
    # One person cannot revoke another's key.
    assert await status_and_type(await first.delete(f"{API}/auth/api-keys/{rosas['id']}",
                                                    headers=bearer(quinn["token"]))) == (404, "api_key_not_found")
    assert (await second.get(f"{API}/probe/me", headers=bearer(rosas["key"]))).status == 200
    revoked = await first.delete(f"{API}/auth/api-keys/{rosas['id']}", headers=bearer(admin))
    assert (await revoked.json())["revoked_at"] is not None
    assert await status_and_type(await second.get(f"{API}/probe/me", headers=bearer(rosas["key"]))) == \
        (401, "invalid_api_key")
    await first.delete(f"{API}/auth/api-keys/{quinns['id']}", headers=bearer(quinn["token"]))
    assert (await second.get(f"{API}/probe/me", headers=bearer(quinns["key"]))).status == 401
    await add_person(first, admin, "sam")  # a person without keys lists none
