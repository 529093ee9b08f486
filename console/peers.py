"""How the console reaches the services it supervises: through the core's one peer transport
(gateway/peers.py), one `PeerClient` per service of the table, each found where every service
finds its peers (`gateway.peer_location.service_url`: the service's `*_URL` variable or `[peers]`
setting, else its port of the service table on 127.0.0.1, the addresses the supervisor hands
each service for its peers), over one client session, with the service credential
(SERVICE_TOKEN) or, for the gateway's administrator API, an access token the console gets by
logging in as the administrator (ADMIN_USERNAME / ADMIN_PASSWORD, the generated password of
DATA_DIR/secrets.json when unset). The tokens are kept in memory only; the access token is
renewed with the refresh token shortly before it expires (a login again when that fails), and
replaced by a new login once when the gateway answers 401. They are never logged and never part
of an answer.

The console answers in its own error bodies (docs/console.md, "Errors of the console itself"):
`service_unreachable` naming the service, and what a service answered is the console's to map
(a proxy passes it back, a panel's source calls it `service_error`), so its clients raise only
when no answer came."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Mapping

import aiohttp

from gateway.config import Config
from gateway.peer_location import service_url
from gateway.peers import PeerAnswer, PeerClient, PeerFailed, PeerTimeout
from gateway.services import ServiceSpec

GATEWAY = "gateway"
LOGIN_PATH = "/api/v1/auth/login"
REFRESH_PATH = "/api/v1/auth/refresh"
# Renew the administrator's token when it has less than this left (seconds).
RENEW_MARGIN = 60.0
# A proxied call: a peer that accepts no connection in 5 s counts as unreachable; the answer may
# take 120 s between two reads (a long transcription included).
PROXY_TIMEOUT = PeerTimeout(connect=5.0, read=120.0)
# The administrator's login and its renewal.
AUTH_TIMEOUT = PeerTimeout(connect=None, total=10.0)


class PeerError(PeerFailed):
    """A service that could not be asked: its name and why, as the console's error body (502)."""

    status = 502

    def __init__(self, service: str, error: str, error_type: str = "service_unreachable", hint: str | None = None):
        super().__init__(error, error_type, hint, extra={"service": service})
        self.service = service


class ServiceClient(PeerClient):
    """Calls to one service of the table. Every answer comes back as the service gave it
    (`check` passes each); no answer is the console's `service_unreachable`. Without
    `credential` no Authorization is sent (the login, a health check)."""

    def __init__(self, peers: Peers, spec: ServiceSpec, *, credential: bool = True):
        super().__init__(peers, spec.id, timeout=PROXY_TIMEOUT, service=spec.name, error_prefix="service")
        self.spec, self.credential = spec, credential

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return super().headers(extra) if self.credential else dict(extra or {})

    def check(self, answer: PeerAnswer) -> PeerAnswer:
        return answer

    def unreachable(self, reason: str, *, hint: str | None = None, peer_status: int | None = None) -> PeerError:
        return PeerError(self.spec.id, reason, "service_unreachable",
                         hint=hint or f"Start it (POST /api/services/{self.spec.id}/start) or read its log "
                                      f"(GET /api/logs/{self.spec.id}).")

    def not_reached(self, error: BaseException) -> PeerError:
        if isinstance(error, asyncio.TimeoutError):
            reason = "no answer in time"
        elif isinstance(error, aiohttp.ClientConnectorError):
            reason = (error.os_error.strerror or "").lower() or "connection failed"
        else:
            reason = type(error).__name__
        return self.unreachable(f"The {self.spec.name} ({self.spec.id}) cannot be reached at "
                                f"{self.context.peer_url(self.peer)} ({reason}).")


class Peers:
    """The console's side of the peer transport (a `gateway.peers.PeerContext`): the services'
    addresses, the credentials, the one client session, a client per service."""

    def __init__(self, specs: list[ServiceSpec], config: Config):
        self.config = config
        self.specs = {spec.id: spec for spec in specs}
        self._urls = {spec.id: service_url(config, spec) for spec in specs}
        self._clients = {spec.id: ServiceClient(self, spec) for spec in specs}
        self._bare_clients = {spec.id: ServiceClient(self, spec, credential=False) for spec in specs}
        self._service_token = config.settings.auth.service_token
        self._admin_username = config.settings.auth.admin_username
        self._admin_password = config.settings.auth.admin_password
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
        self._http = aiohttp.ClientSession(timeout=PROXY_TIMEOUT.client_timeout())

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        assert self._http is not None, "Peers.open() was not awaited (the console app's cleanup context)"
        return self._http

    # ---------------------------------------------------------------- addresses and credentials

    def peer_url(self, peer: str) -> str:
        """Where a service of the table answers, no trailing slash (the clients' peers are the
        services' ids)."""
        return self._urls.get(peer, "")

    def peer_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._service_token}"}

    def spec(self, service_id: str) -> ServiceSpec:
        spec = self.specs.get(service_id)
        if spec is None:
            raise PeerError(service_id, f"The service table has no service {service_id!r}.",
                            "service_not_configured", hint="conf/services.toml (or GATEWAY_CONF_DIR) lists the services.")
        return spec

    def client(self, service_id: str, *, credential: bool = True) -> ServiceClient:
        """The service's client; without `credential` one that sends no Authorization."""
        self.spec(service_id)
        return (self._clients if credential else self._bare_clients)[service_id]

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
            answer = await self.client(GATEWAY, credential=False).request(
                "POST", REFRESH_PATH, json_body={"refresh_token": self._refresh_token}, timeout=AUTH_TIMEOUT)
        except PeerFailed:
            return False
        body = answer.json() if answer.status == 200 else None
        if not body or not body.get("token"):
            return False
        self._keep(body)
        self.renewals += 1
        return True

    def _keep(self, pair: dict) -> None:
        self._admin_token = str(pair["token"])
        self._refresh_token = str(pair["refresh_token"]) if pair.get("refresh_token") else None
        self._admin_expires = float(pair.get("expires") or time.time() + RENEW_MARGIN * 2)

    async def _login(self) -> None:
        answer = await self.client(GATEWAY, credential=False).request(
            "POST", LOGIN_PATH, json_body={"username": self._admin_username, "password": self._admin_password},
            timeout=AUTH_TIMEOUT)
        body = answer.json() if answer.status == 200 else None
        if not body or not body.get("token"):
            detail = "" if answer.status == 200 else answer.body.decode("utf-8", "replace")[:200]
            raise PeerError(GATEWAY, "The gateway refused the console's administrator login "
                                     f"(HTTP {answer.status}).", "gateway_login_failed",
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
        client = self.client(service_id)
        refused: dict[str, str] | None = None
        for attempt in (1, 2):
            headers = await self.admin_headers(refused) if admin else None
            answer = await client.request("GET", path, params=params, headers=headers,
                                          timeout=PeerTimeout(connect=None, total=timeout))
            if answer.status == 401 and admin and attempt == 1:
                refused = headers
                continue
            if answer.status != 200:
                raise PeerError(service_id, f"{client.spec.name} answered HTTP {answer.status} to GET {path}.",
                                "service_error", hint=f"Read its log: GET /api/logs/{service_id}")
            if not answer.body.strip():
                return None  # as aiohttp's own reading of an empty body
            try:
                return answer.decoded()
            except ValueError:
                raise PeerError(service_id, f"{client.spec.name} answered GET {path} with "
                                            f"something other than JSON.", "service_error") from None
        raise AssertionError("unreachable")  # pragma: no cover
