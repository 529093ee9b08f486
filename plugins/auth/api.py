"""The /auth/* routes and /profile (spec: "Authentication and profile")."""
from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

import marshmallow
import psycopg2
from aiohttp import web
from marshmallow import fields, validate

from gateway.clock import rfc3339
from gateway.context import Context
from gateway.database import DatabaseTimeout, unavailable as database_unavailable
from gateway.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable, TooManyRequests, Unauthorized
from gateway.forwarding import Network
from gateway.identity import ADMIN_USER_ID, Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import load, parse_body, parse_query

from . import store
from .addresses import client_address, limit_key
from .passwords import PasswordHasher
from .standing import Standings
from .schemas import LoggedOut, Profile, SignedIn, TokenPair
from .tokens import PASSWORD_CHANGE_PENDING, JwtTokens, bearer_token, invalid_token
from .zones import PersonZones, valid_zone

if TYPE_CHECKING:
    from .person_data import PersonData as PersonDataRegistry

log = logging.getLogger("plugins.auth")

routes = web.RouteTableDef()

USER_ID_PREFIX = "user_"
USERNAME_PATTERN = r"^[a-zA-Z0-9_]+\Z"
RATE_WINDOW_SECONDS = 60
# What "the database cannot be reached" looks like through aiopg.
# What a database outage raises; `gateway.database.unavailable` tells an outage from a failed
# statement, the same way the core's error middleware does.
DATABASE_ERRORS = (psycopg2.Error, DatabaseTimeout)


class _Lenient(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE  # clients may send extra fields (device names and the like)


def _username_field(**kwargs) -> fields.String:
    return fields.String(required=True, validate=[
        validate.Length(min=3, max=32),
        validate.Regexp(USERNAME_PATTERN, error="Use only letters, digits and underscores."),
    ], **kwargs)


class RegisterSchema(_Lenient):
    username = _username_field()
    password = fields.String(required=True, validate=validate.Length(min=6, max=64))
    email = fields.String(required=True, validate=[
        validate.Length(min=3, max=254),
        validate.Regexp(r"^[^@\s]+@[^@\s]+\Z", error="Not an email address (it must contain @)."),
    ])
    nickname = fields.String(required=True, validate=validate.Length(min=1, max=32))
    verify_code = fields.String(required=True, validate=validate.Length(equal=6))


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


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison of two strings (secrets must not leak through timing)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def wrong_credentials() -> Unauthorized:
    return Unauthorized("Wrong username or password.", error_type="invalid_credentials",
                        hint="Check both and try again.")


Handler = Callable[[web.Request], Awaitable[web.Response]]


def needs_database(action: str) -> Callable[[Handler], Handler]:
    """A database outage during the handler is a 503 that says so, not a 500."""
    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def guarded(request: web.Request) -> web.Response:
            try:
                return await handler(request)
            except DATABASE_ERRORS as error:
                if not database_unavailable(error):
                    raise
                log.warning("%s failed: the database is unavailable (%s)", action, error)
                raise ServiceUnavailable(f"{action} needs the database, which is unavailable.",
                                         error_type="database_unavailable",
                                         hint="Try again shortly.") from None
        return guarded
    return decorate


@dataclass(frozen=True)
class AccountLimits:
    """The per-account part of the login limit (docs/auth.md, "Login limits"): after
    `free_failures` failed logins of one account within `window` seconds, an address that fails
    on it must wait before its next attempt on it: 1 second, doubling with each further failure,
    at most `max_delay`. Per address, never per account alone, so no stranger can lock the owner
    out: the owner's own first attempt is never delayed, a retry at most `max_delay`."""
    free_failures: int = 5
    window: int = 900
    max_delay: int = 120

    def delay_after(self, failures: int) -> int:
        """Seconds to wait after an account's `failures`-th failure in its window (0: none)."""
        beyond = failures - self.free_failures
        if beyond <= 0:
            return 0
        return min(self.max_delay, 2 ** min(beyond - 1, 20))


class Accounts:
    """The steps the sign-in handlers share, bound to the plugin's settings, the tokens and the
    password hasher; stored on the application under `ACCOUNTS`."""

    def __init__(self, context: Context, tokens: JwtTokens, hasher: PasswordHasher,
                 trusted_proxies: list[Network], rate_limit: int, admin_nickname: str,
                 account_limits: AccountLimits = AccountLimits(), *, standings: Standings,
                 person_data: PersonDataRegistry, people_may_be_admins: bool = False,
                 invitation_hours: int = 72):
        self.context = context
        self.tokens = tokens
        self.hasher = hasher
        self.trusted_proxies = trusted_proxies
        self.rate_limit = rate_limit
        self.account_limits = account_limits
        self.admin_nickname = admin_nickname
        self.standings = standings
        self.person_data = person_data
        self.people_may_be_admins = people_may_be_admins
        self.invitation_hours = invitation_hours

    @property
    def config(self):
        return self.context.config

    @property
    def admin_username(self) -> str:
        return str(self.config.get("auth.admin_username") or "admin")

    def admin_identity(self) -> Identity:
        return Identity(user_id=ADMIN_USER_ID, username=self.admin_username, is_admin=True,
                        nickname=self.admin_nickname or self.admin_username)

    # -- shared steps
    def client_of(self, request: web.Request) -> str:
        """Whom attempts are counted against: the client address (vouched for by the frontend,
        forwarded by a trusted proxy, or the peer), an IPv6 one by its /64."""
        service_token = str(self.config.get("auth.service_token") or "")
        return limit_key(client_address(request, self.trusted_proxies, service_token))

    async def limit_rate(self, client: str, action: str) -> None:
        """About `rate_limit` attempts a minute per client address, counted on the bus so
        every gateway instance sharing Redis shares the count."""
        count, remaining = await self.context.bus.incr(f"auth:rate:{action}:{client}", RATE_WINDOW_SECONDS)
        if count > self.rate_limit:
            retry_after = max(1, math.ceil(remaining))
            raise TooManyRequests(f"Too many {action} attempts; try again in {retry_after} seconds.",
                                  error_type="rate_limited", headers={"Retry-After": str(retry_after)},
                                  hint=f"At most {self.rate_limit} {action} attempts a minute per address.")

    @staticmethod
    def _account_key(username: str) -> str:
        """Usernames are one account regardless of case; hashed, so a key stays short whatever
        was typed (unknown names are counted too, or delays would tell which names exist)."""
        return hashlib.sha256(username.strip().lower().encode("utf-8")).hexdigest()[:32]

    async def wait_for_account(self, username: str, client: str) -> None:
        """429 while this client must still wait after its last failed login on this account."""
        until = await self.context.bus.get(f"auth:login:wait:{self._account_key(username)}:{client}")
        if until is None:
            return
        try:
            remaining = float(until) - time.time()
        except ValueError:
            return
        if remaining <= 0:
            return
        retry_after = max(1, math.ceil(remaining))
        raise TooManyRequests(f"Too many failed logins for this account; try again in {retry_after} seconds.",
                              error_type="rate_limited", headers={"Retry-After": str(retry_after)},
                              hint=f"After repeated failures an account's logins are slowed (at most "
                                   f"{self.account_limits.max_delay} seconds between attempts from one "
                                   f"address).")

    async def record_failure(self, username: str, client: str) -> None:
        """Count a failed login against the account; beyond the free ones, this client waits."""
        account = self._account_key(username)
        failures, _ = await self.context.bus.incr(f"auth:login:failures:{account}",
                                                  self.account_limits.window)
        delay = self.account_limits.delay_after(failures)
        if delay:
            await self.context.bus.set(f"auth:login:wait:{account}:{client}", f"{time.time() + delay:.3f}",
                                       ttl=delay)

    async def issue_pair(self, identity: Identity, *, record: bool = True, family: str | None = None,
                         generation: int | None = None, password_change_required: bool = False) -> dict:
        """A refresh token and an access token in `family`: a login's family, or a fresh one for a
        new login. `generation`: the person's token generation (standing.py);
        `password_change_required`: the access token opens only choosing a password."""
        family = family or uuid.uuid4().hex
        refresh_token, refresh_claims = self.tokens.issue_refresh(identity, family)
        if record:
            await store.store_refresh(self.context.db, refresh_token, family, identity.user_id,
                                      refresh_claims["exp"])
        token, expires = self.tokens.issue_access(identity, family=family, generation=generation,
                                                  password_change_required=password_change_required)
        return {"token": token, "refresh_token": refresh_token, "expires": expires}

    @staticmethod
    def person_identity(row: dict) -> tuple[Identity, int]:
        """A person's identity and token generation, from their row."""
        return (Identity(user_id=USER_ID_PREFIX + row["username"], username=row["username"],
                         nickname=row["nickname"], is_admin=bool(row["is_admin"])),
                int(row["token_generation"]))

    async def current_identity_of(self, user_id: str, username: str) -> tuple[Identity, int | None, bool]:
        """The identity, token generation and whether the password must still be changed, behind
        a token being renewed, as they are now: a deleted or disabled person or a renamed
        administrator gets no new tokens, and a renewal keeps a pending password change."""
        if user_id == ADMIN_USER_ID:
            if not _same(username, self.admin_username):
                raise invalid_token("The administrator account has changed; log in again.")
            return self.admin_identity(), None, False
        if not user_id.startswith(USER_ID_PREFIX):
            raise invalid_token()
        row = await store.find_user(self.context.db, user_id[len(USER_ID_PREFIX):])
        if row is None or USER_ID_PREFIX + row["username"] != user_id:
            raise invalid_token("The account no longer exists.", "user_not_found")
        if row["disabled_at"] is not None:
            raise invalid_token("This account is disabled.", "account_disabled",
                                hint="Ask the administrator to enable it.")
        identity, generation = self.person_identity(row)
        return identity, generation, bool(row["password_change_required"])

    # -- renewing
    async def rotate(self, refresh_token: str) -> dict:
        claims = self.tokens.verify_refresh(refresh_token)
        identity, generation, must_change = await self.current_identity_of(
            claims["sub"], str(claims.get("username") or ""))
        new_token, new_claims = self.tokens.issue_refresh(identity, claims["fam"])
        outcome = await store.rotate_refresh(self.context.db, refresh_token, claims["fam"],
                                             new_token, new_claims["exp"])
        if outcome == "reused":
            log.warning("refresh token reused for %s; its family %s is revoked", identity.user_id, claims["fam"])
            raise invalid_token("This refresh token was already used; every token of this login is "
                                "now revoked.", "refresh_token_reused",
                                hint="Log in again with POST /api/v1/auth/login.")
        if outcome == "revoked":
            raise invalid_token("This login has been revoked (logged out).", "token_revoked",
                                hint="Log in again with POST /api/v1/auth/login.")
        if outcome != "rotated":
            raise invalid_token("The refresh token is not valid.", "invalid_refresh_token")
        token, expires = self.tokens.issue_access(identity, family=claims["fam"], generation=generation,
                                                  password_change_required=must_change)
        return {"token": token, "refresh_token": new_token, "expires": expires}

    async def renew_from_access(self, access_token: str) -> dict:
        claims = self.tokens.decode_access_for_refresh(access_token)
        db = self.context.db
        if claims.get("fam") and await store.family_revoked(db, claims["fam"]):
            raise invalid_token("This login has been revoked.", "token_revoked",
                                hint="Log in again with POST /api/v1/auth/login.")
        identity, generation, must_change = await self.current_identity_of(
            claims["sub"], str(claims.get("username") or ""))
        if not await store.spend_access(db, claims["jti"], claims["sub"],
                                        claims["iat"] + self.tokens.refresh_lifetime):
            raise invalid_token("This access token was already renewed or logged out.", "token_revoked",
                                hint="Use the refresh token you received, or log in again.")
        # The renewed tokens stay in the login's family, so logging that login out covers them too.
        return await self.issue_pair(identity, family=claims.get("fam"), generation=generation,
                                     password_change_required=must_change)


ACCOUNTS = web.AppKey("auth.accounts", Accounts)
PERSON_ZONES_KEY = web.AppKey("auth.person_zones", PersonZones)


def accounts_of(request: web.Request) -> Accounts:
    return request.config_dict[ACCOUNTS]


@routes.post("/api/v1/auth/register", name="auth.register")
@api_doc("Create an account (when REGISTRATION_ENABLED)", body=RegisterSchema, responses={201: SignedIn},
         errors=(403, 409, 429, 503), auth="none")
@needs_database("Registration")
async def register(request: web.Request) -> web.Response:
    accounts = accounts_of(request)
    await accounts.limit_rate(accounts.client_of(request), "register")
    if not accounts.config.get("auth.registration_enabled"):
        raise Forbidden("Registration is not open.", error_type="registration_closed",
                        hint="The operator enables it with REGISTRATION_ENABLED=true.")
    body = await parse_body(request, RegisterSchema())
    expected_code = str(accounts.config.get("auth.registration_verify_code") or "")
    if not expected_code or not _same(body["verify_code"], expected_code):
        raise BadRequest("The verification code is wrong.", error_type="invalid_verify_code",
                         hint="Ask the operator for the registration code.")
    if body["username"].lower() == accounts.admin_username.lower():
        raise Conflict("This username is already taken.", error_type="username_taken",
                       hint="Choose another username.")
    password_hash = await accounts.hasher.hash(body["password"])
    row = await store.create_user(accounts.context.db, body["username"], body["email"],
                                  body["nickname"], password_hash)
    identity, generation = accounts.person_identity(row)
    pair = await accounts.issue_pair(identity, generation=generation)
    return web.json_response({"user_id": identity.user_id, "nickname": identity.nickname, **pair},
                             status=201)


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
        if not _same(password, str(accounts.config.get("auth.admin_password") or "")):
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


class ProfileQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "Administrator and services: whose profile (default: the caller's)."})


class ProfileUpdate(marshmallow.Schema):
    timezone = fields.String(required=True, validate=validate.Length(min=1, max=64), metadata={
        "description": "IANA time zone name, e.g. \"Asia/Shanghai\"; what reminders and rules read "
                       "\"tomorrow at 9\" in."})


@routes.get("/api/v1/profile", name="auth.profile")
@api_doc("The caller's profile (the administrator and services: anyone's, with user_id)", query=ProfileQuery,
         responses={200: Profile}, errors=(403, 404))
async def profile(request: web.Request) -> web.Response:
    identity = await require_user(request)
    target = owner_for(identity, parse_query(request, ProfileQuery())["user_id"])
    return web.json_response(await _profile_of(request, identity, target))


@routes.put("/api/v1/profile", name="auth.profile_update")
@api_doc("Change the caller's preferences: their time zone (the administrator: anyone's, with ?user_id=)",
         query=ProfileQuery, body=ProfileUpdate, responses={200: Profile}, errors=(403, 404, 503))
async def update_profile(request: web.Request) -> web.Response:
    identity = await require_user(request)
    target = owner_for(identity, parse_query(request, ProfileQuery())["user_id"])
    zone = (await parse_body(request, ProfileUpdate()))["timezone"]
    if not valid_zone(zone):
        raise BadRequest(f"{zone!r} is not a known time zone.", error_type="validation_error",
                         hint="Use an IANA name such as \"Europe/Berlin\", \"America/New_York\" or \"Asia/Shanghai\".")
    answer = await _profile_of(request, identity, target)  # 404 for nobody, before anything is stored
    try:
        await request.config_dict[PERSON_ZONES_KEY].set_zone(target, zone)
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        raise ServiceUnavailable("Saving the time zone needs the database, which is unavailable.",
                                 error_type="database_unavailable", hint="Try again shortly.") from None
    return web.json_response({**answer, "timezone": zone, "timezone_chosen": True})


async def _profile_of(request: web.Request, caller: Identity, user_id: str) -> dict:
    """The spec's profile of `user_id`, with their time zone. Without the database it still
    answers from what is known (created_at null, the default zone)."""
    accounts = accounts_of(request)
    zones = request.config_dict[PERSON_ZONES_KEY]
    try:
        chosen = await zones.chosen_zone(user_id)
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        chosen = None
    # A client may set the person's zone from the device once when none was chosen (the web
    # client does, on sign-in), never overriding a choice.
    zone, zone_fields = chosen or zones.default_zone, {"timezone_chosen": chosen is not None}
    if user_id == caller.user_id and caller.kind == "service":
        return {"user_id": caller.user_id, "username": caller.username,
                "nickname": caller.nickname or caller.username, "is_admin": caller.is_admin,
                "created_at": None, "timezone": zone, "password_change_required": False, **zone_fields}
    if user_id == ADMIN_USER_ID:
        admin = accounts.admin_identity()
        try:
            created_at = await store.installed_at(accounts.context.db)
        except DATABASE_ERRORS as error:
            if not database_unavailable(error):
                raise
            log.warning("profile without a database: %s", error)
            created_at = None
        return {"user_id": admin.user_id, "username": admin.username, "nickname": admin.nickname,
                "is_admin": True, "created_at": rfc3339(created_at, "seconds"), "timezone": zone,
                "password_change_required": False, **zone_fields}
    username = user_id[len(USER_ID_PREFIX):] if user_id.startswith(USER_ID_PREFIX) else ""
    try:
        row = await store.find_user(accounts.context.db, username) if username else None
    except DATABASE_ERRORS as error:
        if not database_unavailable(error) or user_id != caller.user_id:
            raise
        # The spec: the profile still answers, from the token, with created_at null.
        log.warning("profile without a database: %s", error)
        return {"user_id": caller.user_id, "username": caller.username, "nickname": caller.nickname,
                "is_admin": False, "created_at": None, "timezone": zone,
                "password_change_required": bool(request.get(PASSWORD_CHANGE_PENDING)), **zone_fields}
    if row is None or USER_ID_PREFIX + row["username"] != user_id:
        raise NotFound("The user does not exist.", error_type="user_not_found",
                       hint="The account may have been deleted; log in again.")
    return {"user_id": user_id, "username": row["username"], "nickname": row["nickname"], "is_admin": False,
            "created_at": rfc3339(row["created_at"], "seconds"), "timezone": zone,
            "password_change_required": bool(row["password_change_required"]), **zone_fields}
