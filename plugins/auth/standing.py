"""Whether a person's credential still counts, asked on every request (docs/auth.md, "People"
and "Personal API keys").

Access tokens are verified with the secret alone, but a person disabled, deleted or demoted
must lose theirs at once, on every instance: each token carries its person's token generation
(claim `gen`), and the person's current generation and standing are read from the database.
Where the bus is shared by every instance (Redis), standings are kept for a short while and
dropped when any instance publishes a change on `PEOPLE_CHANNEL`; elsewhere (one process, or
the AI core on its own in-process bus) they are read for each request. Personal API keys are
looked up for every request, no copy kept: revoking one takes effect with the next request.

A service without a database (the voice service) checks signatures only and refuses API keys.
While the database is unreachable, a signed access token is still honoured (the service stays
usable during an outage, as before people could be disabled); an API key is not (503)."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

import psycopg2
import psycopg2.errors

from gateway.context import Context
from gateway.contracts import ContractKey
from gateway.database import DatabaseTimeout, unavailable as database_unavailable
from gateway.errors import ServiceUnavailable, Unauthorized
from gateway.identity import ADMIN_USER_ID, Identity

from . import store

log = logging.getLogger("plugins.auth")

USER_ID_PREFIX = "user_"
API_KEY_PREFIX = "ak_"
PEOPLE_CHANNEL = "auth:people"
# How long a standing is kept where changes arrive over a shared bus: the bound on staleness if
# a change's message were lost (a bus that comes back after an outage drops them all at once).
STANDING_SECONDS = 30.0
# A key's last use is written at most this often (every request would be a write).
LAST_USED_RESOLUTION_SECONDS = 60
DATABASE_ERRORS = (psycopg2.Error, DatabaseTimeout)
# A service whose database has no auth tables yet (the AI core starts before the gateway creates
# them) asks again only this often, not on every request.
NO_TABLES_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Standing:
    generation: int | None
    disabled: bool
    deleted: bool
    read_at: float


def key_refused(error: str = "The API key is not valid.", error_type: str = "invalid_api_key") -> Unauthorized:
    return Unauthorized(error, error_type=error_type,
                        hint="Create a key with POST /api/v1/auth/api-keys, or sign in again.")


class Standings:
    """Provided to the bearer authenticator of every service; the auth plugin tells it of each
    change it makes (`changed`)."""

    def __init__(self, context: Context):
        self.context = context
        self._kept: dict[str, Standing] = {}
        self._warned_at = 0.0
        self._no_tables_until = 0.0

    @property
    def _keeps(self) -> bool:
        return self.context.has("bus") and bool(getattr(self.context.bus, "shared", False))

    # -- access tokens
    async def check_token(self, claims: dict) -> None:
        """Raise 401 when the person behind a signed access token may no longer use it."""
        user_id = claims["sub"]
        if not user_id.startswith(USER_ID_PREFIX) or not self.context.has("db"):
            return  # the administrator (from configuration) and services are not people rows
        try:
            standing = await self._standing(user_id)
        except DATABASE_ERRORS as error:
            if not database_unavailable(error):
                raise
            self._warn(f"a person's standing could not be read ({error}); their token is honoured")
            return
        if standing is None:
            return  # no such person (tokens minted by a test, or a service without the auth tables)
        if standing.deleted:
            raise Unauthorized("The account no longer exists.", error_type="user_not_found",
                               hint="Ask the administrator.")
        if standing.disabled:
            raise Unauthorized("This account is disabled.", error_type="account_disabled",
                               hint="Ask the administrator to enable it.")
        # A token without a generation (issued before people had one, or minted through the TOKENS
        # contract without it) is ended by disabling or deleting only.
        if "gen" in claims and claims["gen"] != standing.generation:
            raise Unauthorized("This token has been revoked.", error_type="token_revoked",
                               hint="Renew it with POST /api/v1/auth/refresh, or log in again.")

    async def _standing(self, user_id: str) -> Standing | None:
        keeps = self._keeps
        kept = self._kept.get(user_id) if keeps else None
        if kept is not None and time.monotonic() - kept.read_at < STANDING_SECONDS:
            return kept
        if time.monotonic() < self._no_tables_until:
            return None
        try:
            row = await store.person_state(self.context.db, user_id, user_id[len(USER_ID_PREFIX):])
        except psycopg2.errors.UndefinedTable:
            self._no_tables_until = time.monotonic() + NO_TABLES_SECONDS
            return None  # this database has no people yet (the gateway has not created its tables)
        standing = None if row is None else Standing(
            generation=row["token_generation"], disabled=bool(row["disabled"]), deleted=bool(row["deleted"]),
            read_at=time.monotonic())
        if keeps and standing is not None:
            self._kept[user_id] = standing
        return standing

    def forget(self, user_id: str | None = None) -> None:
        """Drop what is kept of one person (everyone with None): read again on their next request."""
        if user_id is None:
            self._kept.clear()
        else:
            self._kept.pop(user_id, None)

    # -- personal API keys
    async def identify_key(self, key: str, admin_username: str) -> Identity:
        if not self.context.has("db"):
            raise key_refused("This service does not accept API keys.", "api_key_not_accepted")
        row = None
        try:
            if time.monotonic() >= self._no_tables_until:
                row = await store.api_key_for(self.context.db, key)
            if row is not None and self._stale(row["last_used_at"]):
                await store.touch_api_key(self.context.db, row["id"])
        except psycopg2.errors.UndefinedTable:
            self._no_tables_until = time.monotonic() + NO_TABLES_SECONDS
        except DATABASE_ERRORS as error:
            if not database_unavailable(error):
                raise
            raise ServiceUnavailable("API keys cannot be checked while the database is unavailable.",
                                     error_type="database_unavailable", hint="Try again shortly.") from None
        if row is None:
            raise key_refused("The API key is not valid: unknown, revoked or expired.")
        scopes = frozenset(row["scopes"])
        if row["user_id"] == ADMIN_USER_ID:
            return Identity(user_id=ADMIN_USER_ID, username=admin_username, is_admin=True, scopes=scopes)
        if row["no_person"]:
            raise key_refused("The account of this API key no longer exists.", "user_not_found")
        if row["disabled"]:
            raise Unauthorized("This account is disabled.", error_type="account_disabled",
                               hint="Ask the administrator to enable it.")
        return Identity(user_id=row["user_id"], username=row["username"], nickname=row["nickname"],
                        is_admin=bool(row["is_admin"]), scopes=scopes)

    @staticmethod
    def _stale(last_used_at: datetime | None) -> bool:
        return last_used_at is None or time.time() - last_used_at.timestamp() >= LAST_USED_RESOLUTION_SECONDS

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= 60:
            self._warned_at = now
            log.warning(message)

    # -- changes
    async def changed(self, user_id: str, *, ended: bool) -> None:
        """Tell every instance a person's standing changed; `ended`: their sessions end now (their
        open WebSockets are closed)."""
        self.forget(user_id)
        message = {"user_id": user_id, "ended": ended}
        try:
            await self.context.bus.publish(PEOPLE_CHANNEL, message)
        except Exception as error:  # the change is stored; kept standings expire on their own
            log.warning("telling the other instances that %s changed failed: %s", user_id, error)
            await self.on_message(message)

    async def on_message(self, message: dict) -> None:
        user_id = message.get("user_id")
        if not isinstance(user_id, str):
            return
        self.forget(user_id)
        if message.get("ended"):
            for connection in self.context.hub.connections(user_id):
                await connection.ws.close(code=4401, message=b"signed out by the administrator")


# Shared by the two plugins of this package: the auth plugin tells the authenticator of changes.
STANDINGS: ContractKey[Standings] = ContractKey("auth.standings", "whether people's credentials still count")
