"""Signing in and out (`/api/v1/auth/login`, `/refresh`, `/logout`): credentials checked
within the rate and per-account limits, tokens renewed, logins revoked."""
from __future__ import annotations

from aiohttp import web
from marshmallow import fields, validate

from gateway.database import unavailable as database_unavailable
from gateway.errors import BadRequest, Forbidden, ServiceUnavailable, Unauthorized
from gateway.identity import ADMIN_USER_ID, Identity
from gateway.openapi import api_doc
from gateway.validation import load, parse_body

from . import store
from .accounts import (DATABASE_ERRORS, Accounts, _Lenient, _same, _username_field, accounts_of, log,
                       needs_database, wrong_credentials)
from .schemas import LoggedOut, SignedIn, TokenPair
from .tokens import bearer_token

routes = web.RouteTableDef()


class LoginSchema(_Lenient):
    username = fields.String(required=True, validate=validate.Length(min=1, max=256))
    password = fields.String(required=True, validate=validate.Length(min=1, max=1024))


class UsernameSchema(_Lenient):
    username = _username_field()


class RefreshSchema(_Lenient):
    refresh_token = fields.String(load_default=None, allow_none=True)


class LogoutSchema(_Lenient):
    refresh_token = fields.String(load_default=None, allow_none=True)
    all = fields.Boolean(load_default=False)
    others = fields.Boolean(load_default=False, metadata={
        "description": "Revoke every other login of the user and keep this one (the access token's)."})


@routes.post("/api/v1/auth/login", name="auth.login")
@api_doc("Log in with a username and password", body=LoginSchema, responses={200: SignedIn},
         errors=(401, 403, 429, 503), auth="none")
@needs_database("Logging in")
async def login(request: web.Request) -> web.Response:
    accounts = accounts_of(request)
    client = accounts.client_of(request)
    await accounts.limit_rate(client, "login")
    body = await parse_body(request, LoginSchema())
    username, password = body["username"], body["password"]
    await accounts.wait_for_account(username, client)
    try:
        identity, generation, must_change = await _check_credentials(accounts, username, password)
    except Unauthorized:
        await accounts.record_failure(username, client)
        raise
    if identity.user_id != ADMIN_USER_ID:
        # With a one-time password the tokens open only choosing one's own (tokens.py).
        pair = await accounts.issue_pair(identity, generation=generation, password_change_required=must_change)
        return web.json_response({"user_id": identity.user_id, "nickname": identity.nickname, **pair,
                                  "password_change_required": must_change})
    try:
        pair = await accounts.issue_pair(identity)
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        # The administrator can log in during a database outage to see what is wrong;
        # the refresh token cannot be recorded, so it will not be honoured later.
        log.warning("administrator login without a database (%s); refresh token not recorded", error)
        pair = await accounts.issue_pair(identity, record=False)
    return web.json_response({"user_id": identity.user_id, "nickname": identity.nickname, **pair})


async def _check_credentials(accounts: Accounts, username: str, password: str) -> tuple[Identity, int | None, bool]:
    """The identity whose password this is, their token generation and whether they must change
    the password; 401 `invalid_credentials` otherwise (also for an invited person who has not
    chosen one), 403 `account_disabled` for a disabled person's right password."""
    if _same(username, accounts.admin_username):
        if not _same(password, accounts.config.settings.auth.admin_password):
            raise wrong_credentials()
        return accounts.admin_identity(), None, False
    load(UsernameSchema(), {"username": username})
    row = await store.find_user(accounts.context.db, username)
    # The hash is checked even for an unknown user, so timing does not tell which names exist.
    stored = row["password_hash"] if row and row["password_hash"] else None
    if not await accounts.hasher.check(password, stored) or row is None or stored is None:
        raise wrong_credentials()
    if row["disabled_at"] is not None:
        raise Forbidden("This account is disabled.", error_type="account_disabled",
                        hint="Ask the administrator to enable it.")
    identity, generation = accounts.person_identity(row)
    return identity, generation, bool(row["password_change_required"])


@routes.post("/api/v1/auth/refresh", name="auth.refresh")
@api_doc("New tokens for a refresh token (body) or an access token, expired or not (bearer)",
         body=RefreshSchema, body_required=False, responses={200: TokenPair}, errors=(503,), auth="optional")
async def refresh(request: web.Request) -> web.Response:
    accounts = accounts_of(request)
    body = await parse_body(request, RefreshSchema(), allow_empty=True)
    try:
        if body["refresh_token"]:
            return web.json_response(await accounts.rotate(body["refresh_token"]))
        token = bearer_token(request)
        if token is None or accounts.tokens.is_service_token(token):
            raise Unauthorized("No credential was supplied.", error_type="unauthorized",
                               hint="Send refresh_token in the body, or your access token "
                                    "(expired is fine) as Authorization: Bearer.")
        return web.json_response(await accounts.renew_from_access(token))
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        log.warning("refresh failed: the database is unavailable (%s)", error)
        raise ServiceUnavailable("Tokens cannot be renewed while the database is unavailable.",
                                 error_type="database_unavailable", hint="Try again shortly.") from None


@routes.post("/api/v1/auth/logout", name="auth.logout")
@api_doc("Revoke this login (with `all`, every login of the user; with `others`, every other one)", body=LogoutSchema, body_required=False,
         responses={200: LoggedOut}, errors=(403, 503), auth="optional")
async def logout(request: web.Request) -> web.Response:
    """Revoke the login's refresh-token family (or, with `all`, every login of the user) and
    spend the access token, so neither can be renewed again."""
    accounts = accounts_of(request)
    body = await parse_body(request, LogoutSchema(), allow_empty=True)
    user_id, families, revoked = None, set(), 0
    keep_this_login = body["others"] and not body["all"]
    access_token = bearer_token(request)
    try:
        if access_token and not accounts.tokens.is_service_token(access_token):
            claims = accounts.tokens.decode_access_for_refresh(access_token)
            user_id = claims["sub"]
            if not keep_this_login:
                await store.spend_access(accounts.context.db, claims["jti"], user_id,
                                         claims["iat"] + accounts.tokens.refresh_lifetime)
            if claims.get("fam"):
                families.add(claims["fam"])
        if body["refresh_token"]:
            refresh_claims = accounts.tokens.verify_refresh(body["refresh_token"])
            if user_id is not None and refresh_claims["sub"] != user_id:
                raise Forbidden("The refresh token belongs to another user.", error_type="forbidden")
            user_id = refresh_claims["sub"]
            families.add(refresh_claims["fam"])
        if user_id is None:
            raise Unauthorized("No credential was supplied.", error_type="unauthorized",
                               hint="Send your access token as Authorization: Bearer, or "
                                    "refresh_token in the body.")
        if keep_this_login:
            if not families:
                raise BadRequest("Signing out the other devices needs this device's own login.",
                                 error_type="validation_error",
                                 hint="Send the access token of this login as Authorization: Bearer.")
            revoked = await store.revoke_user_except(accounts.context.db, user_id, families)
            return web.json_response({"status": "logged_out", "revoked": revoked})
        if body["all"]:
            revoked = await store.revoke_user(accounts.context.db, user_id)
        else:
            for family in families:
                revoked += await store.revoke_family(accounts.context.db, family)
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        raise ServiceUnavailable("Logging out needs the database, which is unavailable.",
                                 error_type="database_unavailable", hint="Try again shortly.") from None
    return web.json_response({"status": "logged_out", "revoked": revoked})
