"""The people of a household (docs/auth.md, "People"): the administrator adds a person with a
one-time password or an invitation, disables and enables them, resets their password, makes or
unmakes an administrator where the configuration allows, and deletes them with all of their
data after a confirmation. Disabling or deleting ends their tokens, logins, API keys and open
WebSockets at once, on every instance (two instances sharing PostgreSQL and Redis)."""
from __future__ import annotations

import asyncio

import aiohttp
import psycopg2
import pytest

from tests.auth.people_support import (API, add_person, admin_token, bearer, build_people_app, change_password,
                                       person_with_login, sign_in)


@pytest.fixture
async def two_instances(aiohttp_client, auth_config, redis_url, bus_prefix):
    """Two gateway instances on one database and one Redis, as two machines (or workers) are."""
    def config(**settings):
        return auth_config({"bus.redis_url": redis_url, "bus.prefix": bus_prefix}, **settings)

    async def build(**settings):
        first = await aiohttp_client(build_people_app(config(**settings)))
        second = await aiohttp_client(build_people_app(config(**settings)))
        return first, second
    return build


@pytest.fixture
async def one(aiohttp_client, auth_config):
    return await aiohttp_client(build_people_app(auth_config()))


async def me(client, token: str):
    return await client.get(f"{API}/probe/me", headers=bearer(token))


async def error_of(response, status: int, error_type: str) -> dict:
    assert response.status == status, await response.text()
    body = await response.json()
    assert body["errorType"] == error_type and body["error"] and body["hint"], body
    return body


async def test_a_person_made_with_a_one_time_password_changes_it(one):
    admin = await admin_token(one)
    person = await add_person(one, admin, "carol", nickname="Carol", email="carol@example.org")
    assert person["user_id"] == "user_carol" and person["password_change_required"] and not person["invited"]
    assert len(person["one_time_password"]) >= 12 and person["invitation_code"] is None
    signed_in = await sign_in(one, "carol", person["one_time_password"])
    assert signed_in["password_change_required"] is True
    changed = await one.post(f"{API}/auth/password", headers=bearer(signed_in["token"]),
                             json={"current_password": person["one_time_password"], "new_password": "carols-own"})
    assert changed.status == 200, await changed.text()
    renewed = await changed.json()
    # The old login is over; the answer's tokens are the new one.
    await error_of(await me(one, signed_in["token"]), 401, "token_revoked")
    assert (await me(one, renewed["token"])).status == 200
    assert (await sign_in(one, "carol", "carols-own"))["password_change_required"] is False
    wrong = await one.post(f"{API}/auth/login", json={"username": "carol", "password": person["one_time_password"]})
    assert wrong.status == 401
    listed = await (await one.get(f"{API}/admin/users", headers=bearer(admin))).json()
    assert [p["user_id"] for p in listed["users"]] == ["user_carol"] and listed["total"] == 1
    assert "one_time_password" not in listed["users"][0] and not listed["users"][0]["password_change_required"]


PASSWORD_HINT = "Choose your own password with POST /api/v1/auth/password."


async def opens_only_choosing_a_password(client, token: str) -> None:
    """A token from a one-time password: 403 `password_change_required` everywhere (REST, a route
    outside /api/ as /mcp, a WebSocket as /ws/chat) but the profile, which says so."""
    for method, path, body in (("GET", f"{API}/probe/me", None), ("GET", f"{API}/sessions", None),
                               ("POST", f"{API}/auth/api-keys", {"name": "early"}),
                               ("PUT", f"{API}/profile", {"timezone": "Europe/Berlin"}),
                               ("POST", f"{API}/probe/things", None), ("POST", "/mcp-probe", None)):
        refused = await error_of(await client.request(method, path, json=body, headers=bearer(token)),
                                 403, "password_change_required")
        assert refused["hint"] == PASSWORD_HINT, (method, path)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused_socket:
        await client.ws_connect(f"/ws/held?token={token}")
    assert refused_socket.value.status == 403
    profile = await client.get(f"{API}/profile", headers=bearer(token))
    assert profile.status == 200, await profile.text()
    assert (await profile.json())["password_change_required"] is True


async def opens_everything(client, token: str, user_id: str) -> None:
    assert (await (await me(client, token)).json())["user_id"] == user_id
    assert (await client.get(f"{API}/sessions", headers=bearer(token))).status == 200
    assert (await client.post("/mcp-probe", headers=bearer(token))).status == 200
    profile = await (await client.get(f"{API}/profile", headers=bearer(token))).json()
    assert profile["password_change_required"] is False
    async with client.ws_connect(f"/ws/held?token={token}") as socket:
        assert (await socket.receive_json())["connected"] == user_id


async def test_a_one_time_password_opens_nothing_but_choosing_ones_own(one):
    admin = await admin_token(one)
    person = await add_person(one, admin, "lena")
    signed_in = await sign_in(one, "lena", person["one_time_password"])
    await opens_only_choosing_a_password(one, signed_in["token"])
    # Renewing keeps the limit, with the refresh token as with the access token.
    rotated = await (await one.post(f"{API}/auth/refresh", json={"refresh_token": signed_in["refresh_token"]})).json()
    await opens_only_choosing_a_password(one, rotated["token"])
    renewed = await one.post(f"{API}/auth/refresh", headers=bearer(rotated["token"]))
    assert renewed.status == 200, await renewed.text()
    renewed_login = await renewed.json()
    await opens_only_choosing_a_password(one, renewed_login["token"])

    changed = await change_password(one, renewed_login, person["one_time_password"], "lenas-own")
    await opens_everything(one, changed["token"], "user_lena")
    await error_of(await me(one, renewed_login["token"]), 401, "token_revoked")
    renewed_again = await (await one.post(f"{API}/auth/refresh", json={"refresh_token": changed["refresh_token"]})).json()
    await opens_everything(one, renewed_again["token"], "user_lena")
    # Signing in again with her own password gives a token without the limit.
    await opens_everything(one, (await sign_in(one, "lena", "lenas-own"))["token"], "user_lena")


async def test_after_a_reset_the_new_one_time_password_opens_nothing_else_either(one):
    admin = await admin_token(one)
    person, login = await person_with_login(one, admin, "mona")
    await opens_everything(one, login["token"], "user_mona")
    reset = await (await one.patch(f"{API}/admin/users/user_mona", json={"reset_password": "one_time_password"},
                                   headers=bearer(admin))).json()
    assert reset["password_change_required"] is True
    signed_in = await sign_in(one, "mona", reset["one_time_password"])
    assert signed_in["password_change_required"] is True
    await opens_only_choosing_a_password(one, signed_in["token"])
    # She may leave without choosing: logging out works with the limited token.
    logged_out = await one.post(f"{API}/auth/logout", headers=bearer(signed_in["token"]), json={})
    assert logged_out.status == 200, await logged_out.text()
    again = await sign_in(one, "mona", reset["one_time_password"])
    changed = await change_password(one, again, reset["one_time_password"], "monas-second")
    await opens_everything(one, changed["token"], "user_mona")
    assert (await sign_in(one, "mona", "monas-second"))["password_change_required"] is False


async def test_an_invitation_lets_the_person_choose_a_password_once(aiohttp_client, auth_config):
    client = await aiohttp_client(build_people_app(auth_config({"core.public_base_url": "https://home.example"})))
    admin = await admin_token(client)
    person = await add_person(client, admin, "dave", invite=True)
    assert person["invited"] and person["one_time_password"] is None
    assert person["invitation_url"] == f"https://home.example/?invitation={person['invitation_code']}"
    # No password until the invitation is accepted: nothing signs in.
    for password in ("", "x", person["invitation_code"]):
        if password:
            failed = await client.post(f"{API}/auth/login", json={"username": "dave", "password": password})
            assert failed.status == 401
    accepted = await client.post(f"{API}/auth/invitation",
                                 json={"code": person["invitation_code"], "password": "daves-choice"})
    assert accepted.status == 200, await accepted.text()
    assert (await me(client, (await accepted.json())["token"])).status == 200
    await error_of(await client.post(f"{API}/auth/invitation", json={"code": person["invitation_code"],
                                                                      "password": "again-and-again"}),
                   400, "invalid_invitation")
    assert (await sign_in(client, "dave", "daves-choice"))["user_id"] == "user_dave"


async def test_only_the_administrator_manages_people(one):
    admin = await admin_token(one)
    _, login = await person_with_login(one, admin, "erin")
    for method, path in (("GET", "/admin/users"), ("POST", "/admin/users"), ("PATCH", "/admin/users/user_erin"),
                         ("DELETE", "/admin/users/user_erin")):
        answer = await one.request(method, API + path, json={"disabled": True} if method != "GET" else None,
                                   headers=bearer(login["token"]))
        await error_of(answer, 403, "admin_only")
    await error_of(await one.patch(f"{API}/admin/users/admin", json={"disabled": True}, headers=bearer(admin)),
                   403, "admin_account")
    await error_of(await one.patch(f"{API}/admin/users/user_nobody", json={"disabled": True}, headers=bearer(admin)),
                   404, "user_not_found")
    await error_of(await one.patch(f"{API}/admin/users/user_erin", json={}, headers=bearer(admin)),
                   400, "validation_error")
    await error_of(await one.post(f"{API}/admin/users", json={"username": "erin"}, headers=bearer(admin)),
                   409, "username_taken")
    await error_of(await one.post(f"{API}/admin/users", json={"username": "admin"}, headers=bearer(admin)),
                   409, "username_taken")


async def test_disabling_ends_everything_at_once_on_every_instance(two_instances):
    first, second = await two_instances()
    admin = await admin_token(first)
    person, login = await person_with_login(first, admin, "frank")
    key = await (await first.post(f"{API}/auth/api-keys", json={"name": "script"},
                                  headers=bearer(login["token"]))).json()
    assert (await me(second, login["token"])).status == 200  # the second instance keeps his standing
    assert (await me(second, key["key"])).status == 200
    socket = await second.ws_connect(f"/ws/held?token={login['token']}")
    assert (await socket.receive_json())["connected"] == "user_frank"

    disabled = await first.patch(f"{API}/admin/users/user_frank", json={"disabled": True}, headers=bearer(admin))
    assert disabled.status == 200 and (await disabled.json())["disabled"] is True

    closed = await asyncio.wait_for(socket.receive(), 5)
    assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    await socket.close()
    for client in (first, second):
        await error_of(await me(client, login["token"]), 401, "account_disabled")
        await error_of(await me(client, key["key"]), 401, "invalid_api_key")
    await error_of(await second.post(f"{API}/auth/refresh", json={"refresh_token": login["refresh_token"]}),
                   401, "account_disabled")
    await error_of(await second.post(f"{API}/auth/login", json={"username": "frank",
                                                                 "password": person["password"]}),
                   403, "account_disabled")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await second.ws_connect(f"/ws/held?token={login['token']}")
    assert refused.value.status == 401

    enabled = await second.patch(f"{API}/admin/users/user_frank", json={"disabled": False}, headers=bearer(admin))
    assert (await enabled.json())["disabled"] is False
    again = await sign_in(first, "frank", person["password"])
    assert (await me(second, again["token"])).status == 200
    # What disabling ended stays ended: the old token, the old login, the key.
    await error_of(await me(second, login["token"]), 401, "token_revoked")
    await error_of(await me(first, key["key"]), 401, "invalid_api_key")


async def test_a_reset_password_ends_the_old_one_and_its_logins(one):
    admin = await admin_token(one)
    person, login = await person_with_login(one, admin, "gina")
    reset = await (await one.patch(f"{API}/admin/users/user_gina", json={"reset_password": "one_time_password"},
                                   headers=bearer(admin))).json()
    assert reset["one_time_password"] and reset["one_time_password"] != person["one_time_password"]
    await error_of(await me(one, login["token"]), 401, "token_revoked")
    await error_of(await one.post(f"{API}/auth/refresh", json={"refresh_token": login["refresh_token"]}),
                   401, "token_revoked")
    assert (await sign_in(one, "gina", reset["one_time_password"]))["password_change_required"]
    invited = await (await one.patch(f"{API}/admin/users/user_gina", json={"reset_password": "invitation"},
                                     headers=bearer(admin))).json()
    assert invited["invited"] and invited["invitation_code"]
    failed = await one.post(f"{API}/auth/login", json={"username": "gina", "password": reset["one_time_password"]})
    assert failed.status == 401


async def test_making_an_administrator_needs_the_configuration(aiohttp_client, auth_config):
    closed = await aiohttp_client(build_people_app(auth_config()))
    admin = await admin_token(closed)
    await error_of(await closed.post(f"{API}/admin/users", json={"username": "hank", "is_admin": True},
                                     headers=bearer(admin)), 403, "admins_not_allowed")
    await person_with_login(closed, admin, "hank")
    await error_of(await closed.patch(f"{API}/admin/users/user_hank", json={"is_admin": True},
                                      headers=bearer(admin)), 403, "admins_not_allowed")


async def test_an_administrator_made_and_unmade(aiohttp_client, auth_config):
    client = await aiohttp_client(build_people_app(auth_config(people_may_be_admins=True)))
    admin = await admin_token(client)
    _, login = await person_with_login(client, admin, "iris")
    assert (await client.get(f"{API}/probe/admin", headers=bearer(login["token"]))).status == 403
    made = await client.patch(f"{API}/admin/users/user_iris", json={"is_admin": True}, headers=bearer(admin))
    assert (await made.json())["is_admin"] is True
    # Her token carried her old rights: it is refused, and renewing gives the new ones (no sign-out).
    await error_of(await me(client, login["token"]), 401, "token_revoked")
    renewed = await (await client.post(f"{API}/auth/refresh", json={"refresh_token": login["refresh_token"]})).json()
    assert (await client.get(f"{API}/probe/admin", headers=bearer(renewed["token"]))).status == 200
    assert (await client.get(f"{API}/admin/users", headers=bearer(renewed["token"]))).status == 200
    await client.patch(f"{API}/admin/users/user_iris", json={"is_admin": False}, headers=bearer(admin))
    await error_of(await client.get(f"{API}/admin/users", headers=bearer(renewed["token"])), 401, "token_revoked")
    demoted = await (await client.post(f"{API}/auth/refresh",
                                       json={"refresh_token": renewed["refresh_token"]})).json()
    await error_of(await client.get(f"{API}/admin/users", headers=bearer(demoted["token"])), 403, "admin_only")


async def test_deleting_a_person_asks_first_then_removes_all_of_their_data(two_instances, database_url):
    first, second = await two_instances()
    admin = await admin_token(first)
    person, login = await person_with_login(first, admin, "jack")
    await first.post(f"{API}/auth/api-keys", json={"name": "one"}, headers=bearer(login["token"]))
    for _ in range(2):
        made = await first.post(f"{API}/sessions", json={}, headers=bearer(login["token"]))
        assert made.status in (200, 201), await made.text()
    assert (await first.post(f"{API}/probe/things", headers=bearer(login["token"]))).status == 200
    socket = await second.ws_connect(f"/ws/held?token={login['token']}")
    await socket.receive_json()

    asked = await error_of(await first.delete(f"{API}/admin/users/user_jack", headers=bearer(admin)),
                           409, "confirmation_required")
    assert asked["counts"]["sessions"] == 2 and asked["counts"]["api_keys"] == 1
    assert asked["counts"]["things"] == 1 and asked["counts"]["logins"] == 1
    shown = await (await first.get(f"{API}/admin/users/user_jack", headers=bearer(admin))).json()
    assert shown["counts"] == asked["counts"] and shown["username"] == "jack"
    assert (await me(second, login["token"])).status == 200  # asking deleted nothing

    deleted = await first.delete(f"{API}/admin/users/user_jack?confirm=true", headers=bearer(admin))
    assert deleted.status == 200, await deleted.text()
    assert (await deleted.json()) == {"deleted": "user_jack", "counts": asked["counts"]}
    closed = await asyncio.wait_for(socket.receive(), 5)
    assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    await socket.close()
    await error_of(await me(second, login["token"]), 401, "user_not_found")
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        for table in ("chat_sessions", "chat_messages", "auth_api_keys", "auth_refresh_tokens"):
            cursor.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'user_jack'")
            assert cursor.fetchone()[0] == 0, table
        cursor.execute("SELECT count(*) FROM auth_users WHERE username = 'jack'")
        assert cursor.fetchone()[0] == 0
    connection.close()
    assert (await (await first.get(f"{API}/admin/users", headers=bearer(admin))).json())["total"] == 0
    await error_of(await first.delete(f"{API}/admin/users/user_jack?confirm=true", headers=bearer(admin)),
                   404, "user_not_found")

    # Someone new under the same name is someone else: the old token stays refused, theirs works.
    newcomer = await add_person(first, admin, "jack")
    assert (await me(second, login["token"])).status == 401
    fresh = await change_password(second, await sign_in(second, "jack", newcomer["one_time_password"]),
                                  newcomer["one_time_password"], "the-new-jack")
    assert (await me(first, fresh["token"])).status == 200
    sessions = await (await first.get(f"{API}/sessions", headers=bearer(fresh["token"]))).json()
    assert sessions.get("total", len(sessions.get("sessions", []))) == 0


async def test_each_plugin_deletes_what_it_keeps_of_the_person(aiohttp_client, auth_config, database_url, tmp_path):
    """Real feature plugins (files with their blobs, reminders, automation, notifications) count
    and delete their own rows through PERSON_DATA; another person's data stays."""
    from gateway.app import create_app
    from plugins.auth import AuthPlugin, TokensPlugin
    from plugins.automation import plugin as automation_plugin
    from plugins.files import files_plugin
    from plugins.notifications import plugin as notifications_plugin
    from plugins.reminders import plugin as reminders_plugin
    from plugins.sessions import SessionsPlugin

    client = await aiohttp_client(create_app("gateway-test", auth_config(), plugins=[
        TokensPlugin(), AuthPlugin(), SessionsPlugin(), files_plugin, notifications_plugin, reminders_plugin,
        automation_plugin]))
    admin = await admin_token(client)
    tokens = {}
    for name in ("uma", "vic"):
        _, login = await person_with_login(client, admin, name)
        tokens[name] = bearer(login["token"])
        form = aiohttp.FormData()
        form.add_field("file", b"notes of " + name.encode(), filename="notes.txt", content_type="text/plain")
        uploaded = await client.post(f"{API}/files/upload", data=form, headers=tokens[name])
        assert uploaded.status in (200, 201), await uploaded.text()
        reminder = await client.post(f"{API}/reminders", headers=tokens[name],
                                     json={"title": "water the plants", "remind_at": "2030-01-01T09:00:00Z"})
        assert reminder.status in (200, 201), await reminder.text()
        scene = await client.post(f"{API}/automation/scenes", headers=tokens[name], json={"name": "Movie night"})
        assert scene.status in (200, 201), await scene.text()
    blobs_before = sorted(path.name for path in (tmp_path / "data").rglob("*") if path.is_file())

    asked = await error_of(await client.delete(f"{API}/admin/users/user_uma", headers=bearer(admin)),
                           409, "confirmation_required")
    assert asked["counts"]["files"] == 1 and asked["counts"]["reminders"] == 1 and asked["counts"]["scenes"] == 1
    assert "notifications" in asked["counts"] and "push_subscriptions" in asked["counts"]
    deleted = await client.delete(f"{API}/admin/users/user_uma?confirm=true", headers=bearer(admin))
    assert deleted.status == 200, await deleted.text()

    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        for table in ("files", "reminders", "automation_scenes"):
            cursor.execute(f"SELECT user_id, count(*) FROM {table} GROUP BY user_id")
            assert dict(cursor.fetchall()) == {"user_vic": 1}, table
    connection.close()
    blobs_after = sorted(path.name for path in (tmp_path / "data").rglob("*") if path.is_file())
    assert len(blobs_after) < len(blobs_before)  # uma's stored file is gone from the blob store
    kept = await (await client.get(f"{API}/files", headers=tokens["vic"])).json()
    assert kept["total"] == 1
