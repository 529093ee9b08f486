"""How the console reaches the services it supervises: where every service finds its peers
(`gateway.peers.service_url`: the service's `*_URL` variable or `[peers]` setting, else its port
of the service table on 127.0.0.1, the addresses the supervisor hands each service for its
peers), over one client session,
with the service credential (SERVICE_TOKEN) or, for the gateway's administrator API, an access
token the console gets by logging in as the administrator (ADMIN_USERNAME / ADMIN_PASSWORD, the
generated password of DATA_DIR/secrets.json when unset). The tokens are kept in memory only;
the access token is renewed with the refresh token shortly before it expires (a login again when
that fails), and replaced by a new login once when the gateway answers 401. They are never logged
and never part of an answer."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from gateway.config import Config
from gateway.errors import ApiError
from gateway.peers import service_url
from gateway.services import ServiceSpec

GATEWAY = "gateway"
LOGIN_PATH = "/api/v1/auth/login"
REFRESH_PATH = "/api/v1/auth/refresh"
# Renew the administrator's token when it has less than this left (seconds).
RENEW_MARGIN = 60.0
# A peer that accepts no connection in this time counts as unreachable.
CONNECT_TIMEOUT = 5.0
# Time a proxied call may wait between two reads of the answer (a long transcription included).
READ_TIMEOUT = 120.0


class PeerError(ApiError):
    """A service that could not be asked: its name and why, as the console's error body (502)."""

    status = 502

    def __init__(self, service: str, error: str, error_type: str = "service_unreachable", hint: str | None = None):
        super().__init__(error, error_type, hint, extra={"service": service})
        self.service = service


class Peers:
    def __init__(self, specs: list[ServiceSpec], config: Config):
        self.specs = {spec.id: spec for spec in specs}
        self._urls = {spec.id: service_url(config, spec) for spec in specs}
        self._service_token = str(config.get("auth.service_token") or "")
        self._admin_username = str(config.get("auth.admin_username") or "admin")
        self._admin_password = str(config.get("auth.admin_password") or "")
        self._admin_token: str | None = None
        self._refresh_token: str | None = None
        self._admin_expires = 0.0
        self._login_lock = asyncio.Lock()
        # How many times the console logged in to the gateway, and renewed its token with the
        # refresh token (tests read them).
        self.logins = 0
        self.renewals = 0
        self._http: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self._http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT, sock_read=READ_TIMEOUT))

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        assert self._http is not None, "Peers.open() was not awaited (the console app's cleanup context)"
        return self._http

    # ---------------------------------------------------------------- addresses and credentials

    def spec(self, service_id: str) -> ServiceSpec:
        spec = self.specs.get(service_id)
        if spec is None:
            raise PeerError(service_id, f"The service table has no service {service_id!r}.",
                            "service_not_configured", hint="conf/services.toml (or GATEWAY_CONF_DIR) lists the services.")
        return spec

    def base_url(self, service_id: str) -> str:
        """Where the service answers, no trailing slash."""
        self.spec(service_id)
        return self._urls[service_id]

    def service_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._service_token}"}

    def unreachable(self, service_id: str, error: BaseException) -> PeerError:
        spec = self.specs.get(service_id)
        name = spec.name if spec else service_id
        if isinstance(error, asyncio.TimeoutError):
            reason = "no answer in time"
        elif isinstance(error, aiohttp.ClientConnectorError):
            reason = (error.os_error.strerror or "").lower() or "connection failed"
        else:
            reason = type(error).__name__
        return PeerError(service_id, f"The {name} ({service_id}) cannot be reached at "
                                     f"{self.base_url(service_id)} ({reason}).",
                         "service_unreachable",
                         hint=f"Start it (POST /api/services/{service_id}/start) or read its log "
                              f"(GET /api/logs/{service_id}).")

    async def admin_headers(self, refused: dict[str, str] | None = None) -> dict[str, str]:
        """The gateway administrator's bearer header, logging in when there is no token, it is
        about to expire, or the gateway refused the one in `refused` (a request that raced this
        one may have renewed it already: then that new one is used)."""
        async with self._login_lock:
            stale = refused is not None and refused.get("Authorization") == f"Bearer {self._admin_token}"
            if stale or self._admin_token is None:
                await self._login()
            elif self._admin_expires - time.time() < RENEW_MARGIN and not await self._renew():
                await self._login()
            return {"Authorization": f"Bearer {self._admin_token}"}

    async def _renew(self) -> bool:
        """Fresh tokens for the refresh token (logins are rate-limited per address; renewals are
        not); False when the gateway does not take it, and a login is needed."""
        if self._refresh_token is None:
            return False
        try:
            async with self.http.post(self.base_url(GATEWAY) + REFRESH_PATH,
                                      json={"refresh_token": self._refresh_token},
                                      timeout=aiohttp.ClientTimeout(total=10)) as response:
                body = await response.json(content_type=None) if response.status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            return False
        if not isinstance(body, dict) or not body.get("token"):
            return False
        self._keep(body)
        self.renewals += 1
        return True

    def _keep(self, pair: dict) -> None:
        self._admin_token = str(pair["token"])
        self._refresh_token = str(pair["refresh_token"]) if pair.get("refresh_token") else None
        self._admin_expires = float(pair.get("expires") or time.time() + RENEW_MARGIN * 2)

    async def _login(self) -> None:
        url = self.base_url(GATEWAY) + LOGIN_PATH
        body: Any = None
        try:
            async with self.http.post(url, json={"username": self._admin_username, "password": self._admin_password},
                                      timeout=aiohttp.ClientTimeout(total=10)) as response:
                status = response.status
                text = await response.text()
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise self.unreachable(GATEWAY, error) from None
        if status == 200:
            try:
                body = json.loads(text)
            except ValueError:
                pass
        detail = "" if status == 200 else text[:200]
        if status != 200 or not isinstance(body, dict) or not body.get("token"):
            raise PeerError(GATEWAY, f"The gateway refused the console's administrator login (HTTP {status}).",
                            "gateway_login_failed",
                            hint="The console logs in with ADMIN_USERNAME / ADMIN_PASSWORD (or the generated "
                                 "password in DATA_DIR/secrets.json): give the console and the gateway the same "
                                 "ones." + (f" The gateway said: {detail}" if detail else ""))
        self._keep(body)
        self.logins += 1

    # ---------------------------------------------------------------- small JSON calls

    async def get_json(self, service_id: str, path: str, *, params: dict | None = None, admin: bool = False,
                       timeout: float = 3.0) -> Any:
        """GET a JSON answer of a service (the dashboard and database panel); PeerError when the
        service cannot be reached or answers anything but 200."""
        url = self.base_url(service_id) + path
        refused: dict[str, str] | None = None
        for attempt in (1, 2):
            headers = await self.admin_headers(refused) if admin else self.service_headers()
            try:
                async with self.http.get(url, params=params, headers=headers,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                    if response.status == 401 and admin and attempt == 1:
                        refused = headers
                        continue
                    if response.status != 200:
                        raise PeerError(service_id, f"{self.spec(service_id).name} answered HTTP {response.status} "
                                                    f"to GET {path}.", "service_error",
                                        hint=f"Read its log: GET /api/logs/{service_id}")
                    try:
                        return await response.json(content_type=None)
                    except ValueError:
                        raise PeerError(service_id, f"{self.spec(service_id).name} answered GET {path} with "
                                                    f"something other than JSON.", "service_error") from None
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                raise self.unreachable(service_id, error) from None
        raise AssertionError("unreachable")  # pragma: no cover
