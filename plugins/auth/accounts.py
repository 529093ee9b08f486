"""What the sign-in routes share (spec: "Authentication and profile"): the account steps
(`Accounts`: rate and per-account login limits, issuing and renewing tokens), the lenient request
schemas, and the 503 of a database outage (`needs_database`). The routes live by concern:
registration.py, login.py (login, refresh, logout), profile.py, api_keys.py, people.py."""
from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import marshmallow
import psycopg2
from aiohttp import web
from marshmallow import fields, validate

from gateway.config import Config
from gateway.context import Context
from gateway.database import DatabaseTimeout, unavailable as database_unavailable
from gateway.errors import ServiceUnavailable, TooManyRequests, Unauthorized
from gateway.forwarding import Network
from gateway.identity import ADMIN_USER_ID, Identity

from . import store
from .addresses import client_address, limit_key
from .passwords import PasswordHasher
from .standing import Standings
from .tokens import JwtTokens, invalid_token
from .zones import PersonZones

if TYPE_CHECKING:
    from .person_data import PersonData as PersonDataRegistry

log = logging.getLogger("plugins.auth")

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


def _username_field(**kwargs: Any) -> fields.String:
    return fields.String(required=True, validate=[
        validate.Length(min=3, max=32),
        validate.Regexp(USERNAME_PATTERN, error="Use only letters, digits and underscores."),
    ], **kwargs)


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
        return min(self.max_delay, int(2 ** min(beyond - 1, 20)))


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
    def config(self) -> Config:
        return self.context.config

    @property
    def admin_username(self) -> str:
        return self.config.settings.auth.admin_username

    def admin_identity(self) -> Identity:
        return Identity(user_id=ADMIN_USER_ID, username=self.admin_username, is_admin=True,
                        nickname=self.admin_nickname or self.admin_username)

    # -- shared steps
    def client_of(self, request: web.Request) -> str:
        """Whom attempts are counted against: the client address (vouched for by the frontend,
        forwarded by a trusted proxy, or the peer), an IPv6 one by its /64."""
        service_token = self.config.settings.auth.service_token
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
        # Never past the configured bound: `remaining` may exceed it by the time's last digit.
        retry_after = max(1, min(math.ceil(remaining), self.account_limits.max_delay))
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
            await self.context.bus.set(f"auth:login:wait:{account}:{client}", repr(time.time() + delay),
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
