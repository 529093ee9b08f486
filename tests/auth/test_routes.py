"""Every row of the spec's auth table, the validation rules at their edges, refresh rotation
and reuse, logout and the profile, against a real PostgreSQL."""
import time
from zoneinfo import ZoneInfo

import jwt
import pytest

from gateway.context import get_context
from gateway.identity import Identity
from tests.auth.conftest import API, bearer, build_app
from tests.conftest import TEST_ADMIN_PASSWORD
from plugins.auth.contract import PERSON_ZONES, TOKENS
from plugins.auth.zones import machine_zone

SECRET = "test-jwt-secret-" + "x" * 32
SPEC_KEYS = {"error", "errorType", "hint"}


def registration(**changes) -> dict:
    body = {"username": "alice", "password": "secret1", "email": "alice@example.com",
            "nickname": "Alice", "verify_code": "ABC123"}
    body.update(changes)
    return body


async def expect_error(response, status, error_type=None):
    assert response.status == status, await response.text()
    body = await response.json()
    assert body["error"] and set(body) <= SPEC_KEYS | {"fields"}, body
    if error_type:
        assert body["errorType"] == error_type, body
    return body


async def register(client, **changes):
    return await client.post(f"{API}/auth/register", json=registration(**changes))


async def login(client, username="alice", password="secret1"):
    return await client.post(f"{API}/auth/login", json={"username": username, "password": password})


# ------------------------------------------------------------------ register

async def test_register_is_closed_by_default(aiohttp_client, auth_config):
    client = await aiohttp_client(build_app(auth_config()))
    await expect_error(await register(client), 403, "registration_closed")


async def test_register_returns_a_working_login(client):
    response = await register(client)
    assert response.status == 201
    body = await response.json()
    assert set(body) == {"user_id", "token", "refresh_token", "expires", "nickname"}
    assert body["user_id"] == "user_alice" and body["nickname"] == "Alice"
    assert isinstance(body["expires"], int) and body["expires"] > time.time()
    profile = await (await client.get(f"{API}/profile", headers=bearer(body["token"]))).json()
    assert profile["user_id"] == "user_alice" and profile["username"] == "alice"
    assert profile["nickname"] == "Alice" and profile["is_admin"] is False
    assert profile["created_at"].endswith("Z")


@pytest.mark.parametrize("field, value, accepted", [
    ("username", "ab", False), ("username", "abc", True), ("username", "a" * 32, True),
    ("username", "a" * 33, False), ("username", "bad-name", False), ("username", "has space", False),
    ("username", "ünïcode", False), ("username", "Under_Score_9", True),
    ("password", "x" * 5, False), ("password", "x" * 6, True), ("password", "x" * 64, True),
    ("password", "x" * 65, False),
    ("email", "no-at-sign", False), ("email", "a@b", True), ("email", "@", False),
    ("nickname", "", False), ("nickname", "N", True), ("nickname", "N" * 32, True), ("nickname", "N" * 33, False),
    ("verify_code", "ABC12", False), ("verify_code", "ABC1234", False), ("verify_code", "ABC123", True),
])
async def test_register_validation_edges(client, field, value, accepted):
    changes = {field: value}
    if field != "username":
        changes["username"] = f"edge_{field}_{len(value)}"
    response = await register(client, **changes)
    if accepted:
        assert response.status == 201, await response.text()
    else:
        body = await expect_error(response, 400, "validation_error")
        assert field in body["error"]


async def test_register_wrong_code_missing_fields_and_taken_names(client):
    await expect_error(await register(client, verify_code="ZZZ999"), 400, "invalid_verify_code")
    response = await client.post(f"{API}/auth/register", json={"username": "alice"})
    body = await expect_error(response, 400, "validation_error")
    assert "password" in body["error"] and "verify_code" in body["error"]
    await expect_error(await client.post(f"{API}/auth/register", data=b"[1]",
                                         headers={"Content-Type": "application/json"}), 400)
    assert (await register(client)).status == 201
    await expect_error(await register(client), 409, "username_taken")
    await expect_error(await register(client, username="ALICE"), 409, "username_taken")
    await expect_error(await register(client, username="admin"), 409, "username_taken")


async def test_a_password_bcrypt_cannot_take_is_a_400(client):
    # 64 characters, within the spec's limit, but 128 bytes in UTF-8: over bcrypt's 72.
    body = await expect_error(await register(client, password="é" * 64), 400, "password_too_long")
    assert "72 bytes" in body["error"]
    assert (await register(client, password="é" * 36)).status == 201  # exactly 72 bytes
    await expect_error(await login(client, password="é" * 37), 400, "password_too_long")


# ------------------------------------------------------------------ login

async def test_administrator_login_is_checked_against_configuration(client):
    response = await login(client, "admin", TEST_ADMIN_PASSWORD)
    assert response.status == 200
    body = await response.json()
    assert set(body) == {"user_id", "nickname", "token", "refresh_token", "expires"}
    assert body["user_id"] == "admin" and isinstance(body["expires"], int)
    claims = jwt.decode(body["token"], SECRET, algorithms=["HS256"])
    assert claims["adm"] is True and claims["typ"] == "access" and claims["sub"] == "admin"
    refresh_claims = jwt.decode(body["refresh_token"], SECRET, algorithms=["HS256"])
    assert refresh_claims["typ"] == "refresh"
    assert refresh_claims["exp"] - refresh_claims["iat"] == 30 * 24 * 3600
    await expect_error(await login(client, "admin", TEST_ADMIN_PASSWORD + "x"), 401, "invalid_credentials")
    await expect_error(await login(client, "admin", ""), 400, "validation_error")


async def test_user_login(client):
    assert (await register(client)).status == 201
    response = await login(client)
    assert response.status == 200
    body = await response.json()
    assert body["user_id"] == "user_alice" and body["nickname"] == "Alice"
    assert (await login(client, "Alice")).status == 200  # names are unique whatever their case
    await expect_error(await login(client, password="wrong-password"), 401, "invalid_credentials")
    await expect_error(await login(client, username="nobody"), 401, "invalid_credentials")
    await expect_error(await login(client, username="bad-name!"), 400, "validation_error")
    await expect_error(await login(client, username="ab"), 400, "validation_error")
    await expect_error(await client.post(f"{API}/auth/login", json={"username": "alice"}), 400)


# ------------------------------------------------------------------ refresh

async def refresh(client, refresh_token=None, headers=None):
    body = {"refresh_token": refresh_token} if refresh_token is not None else None
    return await client.post(f"{API}/auth/refresh", json=body, headers=headers or {})


async def test_refresh_rotates_and_reuse_revokes_the_family(client):
    first = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    response = await refresh(client, first["refresh_token"])
    assert response.status == 200
    second = await response.json()
    assert set(second) == {"token", "refresh_token", "expires"}
    assert second["refresh_token"] != first["refresh_token"]
    assert (await client.get(f"{API}/profile", headers=bearer(second["token"]))).status == 200
    third = await (await refresh(client, second["refresh_token"])).json()

    # The first token again: someone holds a copy. The whole login is revoked, including the newest.
    await expect_error(await refresh(client, first["refresh_token"]), 401, "refresh_token_reused")
    await expect_error(await refresh(client, third["refresh_token"]), 401, "token_revoked")
    # ... and its access tokens can no longer be traded in either.
    await expect_error(await refresh(client, headers=bearer(third["token"])), 401, "token_revoked")
    # Another login is unaffected.
    other = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    assert (await refresh(client, other["refresh_token"])).status == 200


def expired_access(user_id="admin", username="admin", issued_ago=3600, **extra) -> str:
    now = int(time.time())
    claims = {"sub": user_id, "username": username, "nickname": "", "adm": user_id == "admin",
              "typ": "access", "iat": now - issued_ago, "exp": now - issued_ago + 900, "jti": f"j{now}{issued_ago}"}
    claims.update(extra)
    return jwt.encode(claims, SECRET, algorithm="HS256")


async def test_refresh_with_an_expired_access_token(client):
    token = expired_access()
    assert (await client.get(f"{API}/profile", headers=bearer(token))).status == 401
    response = await refresh(client, headers=bearer(token))
    assert response.status == 200
    renewed = await response.json()
    assert set(renewed) == {"token", "refresh_token", "expires"}
    assert (await client.get(f"{API}/profile", headers=bearer(renewed["token"]))).status == 200
    assert (await refresh(client, renewed["refresh_token"])).status == 200
    # Each access token renews once.
    await expect_error(await refresh(client, headers=bearer(token)), 401, "token_revoked")
    # Older than the refresh lifetime: refused.
    await expect_error(await refresh(client, headers=bearer(expired_access(issued_ago=31 * 24 * 3600))),
                       401, "token_expired")
    # A user who no longer exists gets nothing.
    await expect_error(await refresh(client, headers=bearer(expired_access("user_ghost", "ghost"))), 401)


@pytest.mark.parametrize("how", ["nothing", "empty-body", "garbage-body", "access-as-refresh",
                                 "refresh-as-bearer", "wrong-secret", "service-token", "alg-none"])
async def test_refresh_refuses_anything_else(client, how):
    pair = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    foreign = jwt.encode(jwt.decode(pair["refresh_token"], SECRET, algorithms=["HS256"]),
                         "z" * 40, algorithm="HS256")
    none_token = jwt.encode(jwt.decode(pair["refresh_token"], SECRET, algorithms=["HS256"]), None,
                            algorithm="none")
    requests = {
        "nothing": lambda: client.post(f"{API}/auth/refresh"),
        "empty-body": lambda: refresh(client, ""),
        "garbage-body": lambda: refresh(client, "garbage"),
        "access-as-refresh": lambda: refresh(client, pair["token"]),
        "refresh-as-bearer": lambda: refresh(client, headers=bearer(pair["refresh_token"])),
        "wrong-secret": lambda: refresh(client, foreign),
        "service-token": lambda: refresh(client, headers=bearer("test-service-token")),
        "alg-none": lambda: refresh(client, none_token),
    }
    await expect_error(await requests[how](), 401)
    # A refresh token is never a bearer token.
    await expect_error(await client.get(f"{API}/profile", headers=bearer(pair["refresh_token"])), 401)


# ------------------------------------------------------------------ logout

async def test_logout_revokes_the_login(client):
    pair = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    other = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    response = await client.post(f"{API}/auth/logout", json={"refresh_token": pair["refresh_token"]},
                                 headers=bearer(pair["token"]))
    assert response.status == 200
    assert (await response.json())["revoked"] == 1
    await expect_error(await refresh(client, pair["refresh_token"]), 401, "token_revoked")
    await expect_error(await refresh(client, headers=bearer(pair["token"])), 401, "token_revoked")
    assert (await refresh(client, other["refresh_token"])).status == 200  # only that login ended

    await expect_error(await client.post(f"{API}/auth/logout"), 401)
    third = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    response = await client.post(f"{API}/auth/logout", json={"all": True}, headers=bearer(third["token"]))
    assert response.status == 200
    await expect_error(await refresh(client, third["refresh_token"]), 401)


async def test_signing_out_the_other_devices_keeps_this_one(client):
    phone = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    laptop = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    here = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    response = await client.post(f"{API}/auth/logout", json={"others": True}, headers=bearer(here["token"]))
    assert response.status == 200 and (await response.json())["revoked"] == 2
    for gone in (phone, laptop):
        await expect_error(await refresh(client, gone["refresh_token"]), 401, "token_revoked")
    assert (await client.get(f"{API}/profile", headers=bearer(here["token"]))).status == 200  # not spent
    assert (await refresh(client, here["refresh_token"])).status == 200
    # Only a login can keep itself: with its refresh token alone it is the same.
    await expect_error(await client.post(f"{API}/auth/logout", json={"others": True},
                                         headers=bearer("test-service-token")), 401)


async def test_tokens_renewed_from_an_access_token_end_with_their_login(client):
    """A leaked access token traded at /auth/refresh must not outlive the victim's logout."""
    login_pair = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    renewed = await (await refresh(client, headers=bearer(login_pair["token"]))).json()
    assert renewed["refresh_token"] != login_pair["refresh_token"]
    response = await client.post(f"{API}/auth/logout", json={"refresh_token": login_pair["refresh_token"]})
    assert response.status == 200
    await expect_error(await refresh(client, renewed["refresh_token"]), 401, "token_revoked")


async def test_logout_with_someone_elses_refresh_token_is_refused(client):
    assert (await register(client)).status == 201
    alice = await (await login(client)).json()
    admin = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    response = await client.post(f"{API}/auth/logout", json={"refresh_token": admin["refresh_token"]},
                                 headers=bearer(alice["token"]))
    await expect_error(response, 403)
    assert (await refresh(client, admin["refresh_token"])).status == 200


# ------------------------------------------------------------------ profile

async def test_profile(client):
    admin = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    profile = await (await client.get(f"{API}/profile", headers=bearer(admin["token"]))).json()
    assert profile["user_id"] == "admin" and profile["username"] == "admin" and profile["is_admin"] is True
    assert profile["nickname"] == "Administrator" and profile["created_at"].endswith("Z")
    await expect_error(await client.get(f"{API}/profile"), 401)
    tokens = get_context(client.app).contracts.require(TOKENS)
    ghost, _ = tokens.issue_access(Identity(user_id="user_ghost", username="ghost"))
    await expect_error(await client.get(f"{API}/profile", headers=bearer(ghost)), 404, "user_not_found")


async def test_each_person_chooses_their_time_zone_and_the_administrator_may_read_and_set_anyones(client):
    alice = await (await register(client)).json()
    admin = await (await login(client, "admin", TEST_ADMIN_PASSWORD)).json()
    zones = get_context(client.app).contracts.require(PERSON_ZONES)
    before = await (await client.get(f"{API}/profile", headers=bearer(alice["token"]))).json()
    default = before["timezone"]
    assert default == await zones.zone_of("user_alice") and ZoneInfo(default)
    assert before["timezone_chosen"] is False  # a client may set it from the device

    response = await client.put(f"{API}/profile", json={"timezone": "Asia/Shanghai"}, headers=bearer(alice["token"]))
    assert response.status == 200 and (await response.json())["timezone"] == "Asia/Shanghai"
    after = await (await client.get(f"{API}/profile", headers=bearer(alice["token"]))).json()
    assert after["timezone"] == "Asia/Shanghai" and after["timezone_chosen"] is True
    assert await zones.zone_of("user_alice") == "Asia/Shanghai"
    assert await zones.zone_of("admin") == default  # one person's choice is theirs alone

    for bad in ("Mars/Olympus", "../../etc/passwd", "", "UTC "):
        await expect_error(await client.put(f"{API}/profile", json={"timezone": bad}, headers=bearer(alice["token"])), 400)
    await expect_error(await client.put(f"{API}/profile", json={}, headers=bearer(alice["token"])), 400)
    assert await zones.zone_of("user_alice") == "Asia/Shanghai"  # nothing stored by a refusal

    # people read and change only their own; the administrator anyone's
    await expect_error(await client.get(f"{API}/profile?user_id=admin", headers=bearer(alice["token"])), 403)
    await expect_error(await client.put(f"{API}/profile?user_id=admin", json={"timezone": "UTC"},
                                        headers=bearer(alice["token"])), 403)
    seen = await (await client.get(f"{API}/profile?user_id=user_alice", headers=bearer(admin["token"]))).json()
    assert seen["user_id"] == "user_alice" and seen["timezone"] == "Asia/Shanghai" and seen["is_admin"] is False
    response = await client.put(f"{API}/profile?user_id=user_alice", json={"timezone": "Europe/Berlin"},
                                headers=bearer(admin["token"]))
    assert response.status == 200 and await zones.zone_of("user_alice") == "Europe/Berlin"
    await expect_error(await client.put(f"{API}/profile?user_id=user_nobody", json={"timezone": "UTC"},
                                        headers=bearer(admin["token"])), 404, "user_not_found")


async def test_the_deployment_default_time_zone_is_configurable(aiohttp_client, auth_config):
    client = await aiohttp_client(build_app(auth_config({"plugins.auth": {"default_timezone": "America/New_York"}})))
    assert await get_context(client.app).contracts.require(PERSON_ZONES).zone_of("user_anyone") == "America/New_York"


def test_this_machines_zone_is_a_real_one():
    assert ZoneInfo(machine_zone())


async def test_a_non_admin_calling_an_admin_only_route(client):
    body = await (await register(client)).json()
    await expect_error(await client.get(f"{API}/probe/admin", headers=bearer(body["token"])), 403, "admin_only")
    response = await client.get(f"{API}/probe/data?user_id=admin", headers=bearer(body["token"]))
    await expect_error(response, 403)
