"""The token contract (auth_tokens): what the AI core and every other service rely on. These
apps have no database: the plugin must work with the shared secret alone."""
import base64
import json
import time
import warnings

import jwt
import pytest

from gateway.context import get_context
from gateway.identity import Identity
from tests.auth.conftest import bearer, build_app
from plugins.auth.contract import TOKENS

SECRET = "test-jwt-secret-" + "x" * 32


@pytest.fixture
async def tokens_client(aiohttp_client, make_config):
    client = await aiohttp_client(build_app(make_config(), with_auth=False))
    client.tokens = get_context(client.app).contracts.require(TOKENS)
    return client


def claims_for(user_id="user_bob", **extra):
    now = int(time.time())
    claims = {"sub": user_id, "username": "bob", "nickname": "Bob", "adm": False, "typ": "access",
              "iat": now, "exp": now + 600, "jti": "j1"}
    claims.update(extra)
    return claims


async def test_issued_access_token_follows_the_contract(tokens_client):
    token, expires = tokens_client.tokens.issue_access(
        Identity(user_id="user_bob", username="bob", nickname="Bob"))
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    assert {k: claims[k] for k in ("sub", "username", "nickname", "adm", "typ")} == {
        "sub": "user_bob", "username": "bob", "nickname": "Bob", "adm": False, "typ": "access"}
    assert isinstance(expires, int) and claims["exp"] == expires
    assert expires - claims["iat"] == 900  # the documented 15-minute lifetime
    assert claims["jti"]
    identity = tokens_client.tokens.verify_access(token)
    assert identity == Identity(user_id="user_bob", username="bob", nickname="Bob", is_admin=False)


async def test_a_token_minted_by_another_service_is_accepted(tokens_client):
    token = jwt.encode(claims_for("admin", username="admin", nickname="Administrator", adm=True),
                       SECRET, algorithm="HS256")
    response = await tokens_client.get("/api/v1/probe/me", headers=bearer(token))
    assert response.status == 200
    assert await response.json() == {"user_id": "admin", "username": "admin", "nickname": "Administrator",
                                     "is_admin": True, "kind": "user"}
    assert (await tokens_client.get("/api/v1/probe/admin", headers=bearer(token))).status == 200


def _unsigned(claims: dict, header: dict) -> str:
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part(header)}.{part(claims)}."


def _tampered() -> str:
    token = jwt.encode(claims_for(), SECRET, algorithm="HS256")
    header, payload, signature = token.split(".")
    changed = json.loads(base64.urlsafe_b64decode(payload + "=="))
    changed["sub"] = "admin"
    changed["adm"] = True
    forged = base64.urlsafe_b64encode(json.dumps(changed).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def _signed_with(algorithm: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test secret is short for HS512; the point is the switch
        return jwt.encode(claims_for(), SECRET, algorithm=algorithm)


@pytest.mark.parametrize("make_token, error_type", [
    (lambda: jwt.encode(claims_for(exp=int(time.time()) - 5), SECRET, algorithm="HS256"), "token_expired"),
    (_tampered, "invalid_token"),
    (lambda: jwt.encode(claims_for(), "another-secret-" + "y" * 32, algorithm="HS256"), "invalid_token"),
    (lambda: _unsigned(claims_for(sub="admin", adm=True), {"alg": "none", "typ": "JWT"}), "invalid_token"),
    (lambda: _signed_with("HS512"), "invalid_token"),
    (lambda: jwt.encode(claims_for(typ="refresh", fam="f"), SECRET, algorithm="HS256"), "invalid_token"),
    (lambda: jwt.encode({k: v for k, v in claims_for().items() if k != "typ"}, SECRET, algorithm="HS256"),
     "invalid_token"),
    (lambda: jwt.encode({k: v for k, v in claims_for().items() if k != "exp"}, SECRET, algorithm="HS256"),
     "invalid_token"),
    (lambda: "not.a.token", "invalid_token"),
], ids=["expired", "tampered", "wrong-secret", "alg-none", "alg-hs512", "refresh-as-bearer",
        "no-typ", "no-exp", "garbage"])
async def test_bad_bearer_tokens_are_401(tokens_client, make_token, error_type):
    response = await tokens_client.get("/api/v1/probe/me", headers=bearer(make_token()))
    assert response.status == 401
    body = await response.json()
    assert body["errorType"] == error_type and body["error"] and body["hint"]


async def test_missing_or_non_bearer_credentials(tokens_client):
    response = await tokens_client.get("/api/v1/probe/me")
    assert response.status == 401 and (await response.json())["errorType"] == "unauthorized"
    response = await tokens_client.get("/api/v1/probe/me", headers={"Authorization": "Basic YWRtaW46eA=="})
    assert response.status == 401
    response = await tokens_client.get("/api/v1/probe/me", headers={"Authorization": "Bearer "})
    assert response.status == 401
    # The query parameter is only for WebSocket upgrades: tokens in URLs of ordinary requests leak.
    token, _ = tokens_client.tokens.issue_access(Identity(user_id="user_bob", username="bob"))
    assert (await tokens_client.get(f"/api/v1/probe/me?token={token}")).status == 401


async def test_service_credential(tokens_client):
    response = await tokens_client.get("/api/v1/probe/me", headers=bearer("test-service-token"))
    assert await response.json() == {"user_id": "service", "username": "service", "nickname": "",
                                     "is_admin": True, "kind": "service"}
    response = await tokens_client.get("/api/v1/probe/data?user_id=user_carol",
                                       headers=bearer("test-service-token"))
    assert await response.json() == {"owner": "user_carol"}
    assert (await tokens_client.get("/api/v1/probe/me", headers=bearer("test-service-tokem"))).status == 401


async def test_websocket_token_query_parameter(tokens_client):
    token, _ = tokens_client.tokens.issue_access(Identity(user_id="user_bob", username="bob"))
    async with tokens_client.ws_connect(f"/ws/probe?token={token}") as ws:
        assert await ws.receive_json() == {"user_id": "user_bob"}
    async with tokens_client.ws_connect("/ws/probe", headers=bearer(token)) as ws:
        assert await ws.receive_json() == {"user_id": "user_bob"}
    with pytest.raises(Exception) as raised:
        await tokens_client.ws_connect("/ws/probe?token=forged")
    assert getattr(raised.value, "status", None) == 401


async def test_admin_only_and_whose_data(tokens_client):
    user, _ = tokens_client.tokens.issue_access(Identity(user_id="user_bob", username="bob"))
    admin, _ = tokens_client.tokens.issue_access(Identity(user_id="admin", username="admin", is_admin=True))
    response = await tokens_client.get("/api/v1/probe/admin", headers=bearer(user))
    assert response.status == 403 and (await response.json())["errorType"] == "admin_only"
    assert (await tokens_client.get("/api/v1/probe/admin")).status == 401
    assert (await tokens_client.get("/api/v1/probe/admin", headers=bearer(admin))).status == 200

    async def owner(token, query=""):
        response = await tokens_client.get(f"/api/v1/probe/data{query}", headers=bearer(token))
        return response.status, (await response.json()).get("owner")

    assert await owner(user) == (200, "user_bob")
    assert await owner(user, "?user_id=user_bob") == (200, "user_bob")
    assert (await owner(user, "?user_id=user_carol"))[0] == 403
    assert await owner(admin, "?user_id=user_carol") == (200, "user_carol")
    assert await owner(admin) == (200, "admin")


async def test_access_lifetime_is_configurable(aiohttp_client, make_config):
    client = await aiohttp_client(build_app(make_config({"auth.access_token_lifetime": 60}), with_auth=False))
    tokens = get_context(client.app).contracts.require(TOKENS)
    token, expires = tokens.issue_access(Identity(user_id="user_bob", username="bob"))
    assert expires - jwt.decode(token, SECRET, algorithms=["HS256"])["iat"] == 60
