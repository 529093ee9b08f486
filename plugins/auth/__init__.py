"""Authentication: two plugins from one package.

- `auth_tokens` (no routes, no tables of its own): checks bearer tokens, personal API keys and
  the service credential for any service, and where the service has the database, whether the
  person may still use them (standing.py); provides the core's `AUTHENTICATOR` and the `TOKENS`
  and `PERSON_DATA` contracts.
- `auth`: registration, login, refresh, logout and /profile (with each person's time zone,
  the `PERSON_ZONES` contract), personal API keys (api_keys.py) and the administrator's people
  routes (people.py), with users and hashed tokens and keys in PostgreSQL.

See docs/auth.md."""
from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator

from gateway.forwarding import parse_trusted_proxies
from gateway.identity import AUTHENTICATOR
from gateway.context import Context
from gateway.plugins import Plugin, PluginError, Registrar

from . import store
from .contract import PERSON_DATA, PERSON_ZONES, TOKENS
from .person_data import PersonData
from .standing import PEOPLE_CHANNEL, STANDINGS, Standings
from .passwords import PasswordHasher
from .person_data_api import routes as person_data_routes
from .settings import AuthSettings
from .tokens import BearerAuthenticator, JwtTokens
from .zones import PersonZones, valid_zone

log = logging.getLogger("plugins.auth")

PURGE_INTERVAL_SECONDS = 3600


class TokensPlugin(Plugin):
    name = "auth_tokens"
    description = "Checks bearer tokens and the service credential"

    def setup(self, registrar: Registrar) -> None:
        settings = registrar.config.settings.auth
        try:
            tokens = JwtTokens(secret=settings.jwt_secret, access_lifetime=settings.access_token_lifetime,
                               refresh_lifetime=settings.refresh_token_lifetime,
                               service_token=settings.service_token)
        except ValueError as error:
            raise PluginError(f"auth_tokens: {error}") from None
        standings = Standings(registrar.context)
        registrar.provide(TOKENS, tokens)
        registrar.provide(AUTHENTICATOR, BearerAuthenticator(
            tokens, standings, admin_username=settings.admin_username))
        registrar.provide(PERSON_DATA, PersonData())
        registrar.routes(person_data_routes)
        registrar.provide(STANDINGS, standings)

        async def listen(context: Context) -> AsyncIterator[None]:
            """Hear every instance's changes of people (disabled, deleted, demoted)."""
            if not context.has("bus"):
                yield
                return
            subscription = await context.bus.subscribe(PEOPLE_CHANNEL, standings.on_message)

            async def restored() -> None:
                standings.forget()  # changes published while the bus was away were lost
            context.bus.on_restored(restored)
            try:
                yield
            finally:
                await subscription.close()

        registrar.lifespan(listen)


class AuthPlugin(Plugin):
    name = "auth"
    depends = ("auth_tokens",)
    uses = ("database",)
    description = "Registration, login, token refresh and logout, user profiles"
    settings_class = AuthSettings

    def setup(self, registrar: Registrar[AuthSettings]) -> None:
        from . import login, profile, registration
        from .accounts import ACCOUNTS, PERSON_ZONES_KEY, AccountLimits, Accounts
        from .api_keys import routes as api_key_routes
        from .people import routes as people_routes

        settings = registrar.settings
        try:
            trusted = parse_trusted_proxies(settings.trusted_proxies, "plugins.auth.trusted_proxies")
        except ValueError as error:
            raise PluginError(str(error)) from None
        tokens = registrar.context.contracts.require(TOKENS)
        person_data = registrar.context.contracts.require(PERSON_DATA)
        if not isinstance(person_data, PersonData):
            raise PluginError("auth: the PERSON_DATA contract must come from auth_tokens")
        if not isinstance(tokens, JwtTokens):
            raise PluginError("auth: the TOKENS contract must come from auth_tokens "
                              "(it signs refresh tokens too)")
        accounts = Accounts(
            registrar.context, tokens,
            PasswordHasher(settings.bcrypt_rounds),
            trusted_proxies=trusted,
            rate_limit=settings.rate_limit_per_minute,
            account_limits=AccountLimits(free_failures=settings.account_free_failures,
                                         window=settings.account_window_seconds,
                                         max_delay=settings.account_max_delay_seconds),
            admin_nickname=settings.admin_nickname,
            standings=registrar.context.contracts.require(STANDINGS),
            person_data=person_data,
            people_may_be_admins=settings.people_may_be_admins,
            invitation_hours=settings.invitation_hours)
        registrar.app_state(ACCOUNTS, accounts)
        if settings.default_timezone and not valid_zone(settings.default_timezone):
            raise PluginError(f"auth: default_timezone {settings.default_timezone!r} is not a known IANA time zone")
        zones = PersonZones(registrar.context, settings.default_timezone)
        registrar.app_state(PERSON_ZONES_KEY, zones)
        registrar.provide(PERSON_ZONES, zones)
        registrar.routes(registration.routes)
        registrar.routes(login.routes)
        registrar.routes(profile.routes)
        registrar.routes(api_key_routes)
        registrar.routes(people_routes)
        registrar.migrations("plugins.auth")

        async def purge(context: Context) -> None:
            """Expired refresh and spent access tokens are useless; keep the tables small."""
            while True:
                try:
                    await store.purge_expired(context.db)
                except Exception as error:  # an outage must not end the job
                    log.warning("purging expired tokens failed: %s", error)
                await asyncio.sleep(PURGE_INTERVAL_SECONDS)

        registrar.job("purge_expired_tokens", purge)


tokens_plugin = TokensPlugin()
auth_plugin = AuthPlugin()
