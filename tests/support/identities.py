"""A stand-in authenticator for feature tests, so they do not depend on the auth plugin:
`Authorization: Bearer <username>` is that user, `Bearer admin` the administrator, and any
other scheme or an empty token is a bad credential (401)."""
from __future__ import annotations

from aiohttp import web

from gateway.errors import Unauthorized
from gateway.identity import ADMIN_USER_ID, AUTHENTICATOR, Identity
from gateway.plugins import Plugin


def identity_for(username: str) -> Identity:
    if username == ADMIN_USER_ID:
        return Identity(user_id=ADMIN_USER_ID, username=ADMIN_USER_ID, is_admin=True)
    return Identity(user_id=f"user_{username}", username=username)


class BearerNameAuthenticator:
    async def identify(self, request: web.Request) -> Identity | None:
        header = request.headers.get("Authorization", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip().isidentifier():
            raise Unauthorized("Invalid token.", error_type="invalid_token")
        return identity_for(token.strip())


class TestIdentitiesPlugin(Plugin):
    __test__ = False  # not a pytest test class despite its name
    name = "test_identities"
    description = "Bearer <username> identities for tests"

    def setup(self, registrar) -> None:
        registrar.provide(AUTHENTICATOR, BearerNameAuthenticator())


def bearer(username: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {username}"}
