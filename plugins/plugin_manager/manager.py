"""The plugin manager's work: the installed plugins (the list `gateway plugins` prints), what
every running service reports it loaded, and enabling or disabling a plugin for a service."""
from __future__ import annotations

import asyncio
import base64
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from gateway.config import Config
from gateway.context import Context
from gateway.errors import Conflict, NotFound
from gateway.introspection import INTROSPECTION_PATH, describe_service
from gateway.peer_location import service_url
from gateway.peers import PeerAnswer, PeerClient, PeerFailed, PeerTimeout
from gateway.inventory import InstalledPlugin, installed_plugin_list
from gateway.services import OVERRIDE_FILE, ServiceSpec, load_services, set_plugin_enabled
from .settings import PluginManagerSettings

log = logging.getLogger("plugins.plugin_manager")

LOOPBACK = "127.0.0.1"
EMPTY_DETAILS: dict = {"routes": [], "ws_types": [], "ws_server_types": [], "jobs": [], "tools": [],
                       "migrations": [], "provides": [], "reported": {}}


@dataclass
class ServiceState:
    """One service as its introspection answered (or did not)."""
    spec: ServiceSpec
    url: str
    state: str  # running, down, error
    error: str | None = None
    loaded: dict[str, dict] = field(default_factory=dict)  # plugin name -> its introspection entry
    skipped: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict:
        return {"id": self.spec.id, "name": self.spec.name, "url": self.url, "state": self.state,
                "error": self.error, "plugins": list(self.loaded), "configured": list(self.spec.plugins),
                "skipped": [{"name": name, "reason": reason} for name, reason in self.skipped.items()]}


class Manager:
    def __init__(self, context: Context, settings: PluginManagerSettings):
        self.context = context
        self.settings = settings
        self._changing = asyncio.Lock()

    @property
    def configuration(self) -> Path:
        return self.context.config.data_dir / OVERRIDE_FILE

    # ---------------------------------------------------------------- reading

    def _installed(self) -> tuple[list[InstalledPlugin], list[ServiceSpec]]:
        """Blocking: imports the plugins and reads the service table."""
        specs = load_services(data_dir=self.context.config.data_dir)
        return installed_plugin_list(self.context.config, specs), specs

    async def installed(self) -> tuple[list[InstalledPlugin], list[ServiceSpec]]:
        return await asyncio.to_thread(self._installed)

    async def plugins(self) -> dict:
        installed, specs = await self.installed()
        states = await self.service_states(specs)
        return {"plugins": [plugin_view(row, states) for row in installed],
                "services": [state.summary() for state in states],
                "configuration": str(self.configuration)}

    async def plugin(self, name: str) -> dict:
        installed, specs = await self.installed()
        row = find_plugin(installed, name)
        return plugin_view(row, await self.service_states(specs))

    async def service_states(self, specs: list[ServiceSpec]) -> list[ServiceState]:
        """Every service's introspection, asked all at once, each within the timeout."""
        return list(await asyncio.gather(*(self.service_state(spec) for spec in specs)))

    async def service_state(self, spec: ServiceSpec) -> ServiceState:
        # Found as every caller finds a service (gateway/peer_location.py): its *_URL variable,
        # else its port of the table (on `services_host`); asked over the peer transport.
        url = service_url(self.context.config, spec, host=self.settings.services_host)
        try:
            if spec.id == self.context.service_id and self.context.app is not None:
                body = await describe_service(self.context.app)  # this very service: no round trip
            else:
                body = await self.ask_service(spec, url)
        except PeerFailed as failure:
            return ServiceState(spec, url, "down", f"no answer: {failure.error}")
        except ServiceAnswered as answered:
            return ServiceState(spec, url, "error", str(answered))
        return ServiceState(spec, url, "running",
                            loaded={entry["name"]: entry for entry in body.get("plugins", [])},
                            skipped={entry["name"]: entry["reason"] for entry in body.get("skipped", [])})

    async def ask_service(self, spec: ServiceSpec, url: str) -> dict:
        """The service's introspection; `PeerFailed` when it gives no answer."""
        client = AnswerAsGiven(PeerAt(self.context, spec.id, url), spec.id, spec.name,
                               PeerTimeout(connect=None, total=self.settings.introspection_timeout))
        answer = await client.request("GET", INTROSPECTION_PATH)
        body = answer.json()
        if answer.status != 200 or body is None:
            error = body.get("error") if body is not None else None
            raise ServiceAnswered(f"introspection answered {answer.status}" + (f": {error}" if error else ""))
        return body

    # ---------------------------------------------------------------- changing

    async def change(self, name: str, service_id: str, enable: bool) -> dict:
        """Enable or disable `name` for `service_id`: refused (409) when a dependency would break;
        otherwise written to DATA_DIR/service-plugins.toml and the service restarted."""
        async with self._changing:
            installed, specs = await self.installed()
            row = find_plugin(installed, name)
            spec = next((spec for spec in specs if spec.id == service_id), None)
            if spec is None:
                raise NotFound(f"Unknown service {service_id!r}.", error_type="unknown_service",
                               hint=f"The service table lists: {', '.join(s.id for s in specs)}.")
            by_name = {entry.name: entry for entry in installed}
            if enable:
                check_can_enable(row, spec, by_name)
            else:
                check_can_disable(row, spec, by_name, self.context.service_id)
            changed = (name in spec.plugins) != enable
            if changed:
                listed = await asyncio.to_thread(self._listed, name, service_id)
                await asyncio.to_thread(set_plugin_enabled, self.context.config.data_dir, service_id, name,
                                        enable, listed=listed)
                specs = await asyncio.to_thread(load_services, data_dir=self.context.config.data_dir)
                spec = next(s for s in specs if s.id == service_id)
        restart = (await self.restart(service_id) if changed
                   else {"status": "not_needed", "detail": f"{service_id} already "
                                                           f"{'loads' if enable else 'leaves out'} {name}."})
        return {"plugin": name, "service": service_id, "enabled": enable, "changed": changed,
                "plugins": list(spec.plugins), "configuration": str(self.configuration), "restart": restart}

    @staticmethod
    def _listed(name: str, service_id: str) -> bool:
        """Whether the service table itself (without DATA_DIR's changes) names the plugin."""
        return any(spec.id == service_id and name in spec.plugins for spec in load_services())

    async def restart(self, service_id: str) -> dict:
        """Ask the console (CONSOLE_PORT, CONSOLE_TOKEN) to restart the service."""
        console = self.context.config.settings.console
        host = LOOPBACK if console.host in ("0.0.0.0", "::", "") else console.host
        port = console.port
        console_at = PeerAt(self.context, "console", f"http://{host}:{port}", self.console_headers())
        client = AnswerAsGiven(console_at, "console", "console",
                               PeerTimeout(connect=2.0, total=self.settings.restart_timeout))
        if service_id == self.context.service_id:
            # The console stops this very process: the answer goes out while it drains.
            await self.context.scheduler.spawn(self._restart_call(client, service_id))
            return {"status": "requested", "detail": f"The console at {host}:{port} was asked to restart "
                                                     f"{service_id}, this service; it restarts after answering."}
        return await self._restart_call(client, service_id)

    async def _restart_call(self, console: PeerClient, service_id: str) -> dict:
        try:
            answer = await console.request("POST", f"/api/services/{service_id}/restart")
        except PeerFailed as failure:
            return {"status": "pending", "detail": f"{failure.error.rstrip('.')}: the change applies when "
                                                   f"{service_id} next starts."}
        if answer.status == 200:
            return {"status": "restarted", "detail": f"The console restarted {service_id}."}
        body = answer.json()
        error_text = body.get("error") if body is not None else None
        return {"status": "failed", "detail": f"The console answered {answer.status}"
                                              + (f": {error_text}" if error_text else "")}

    def console_headers(self) -> dict[str, str]:
        """The console's credential: CONSOLE_TOKEN, else the administrator's name and password
        (what a console bound beyond loopback accepts); a loopback console asks for none."""
        settings = self.context.config.settings
        token = os.environ.get("CONSOLE_TOKEN") or settings.console.token
        if token:
            return {"Authorization": f"Bearer {token}"}
        pair = f"{settings.auth.admin_username}:{settings.auth.admin_password}"
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


class PeerAt:
    """This service's peer context (gateway/peers.py) with one peer at `url`: a service of the
    table where `services_host` and its *_URL variable put it, or the console (with its own
    credential, `headers`, in place of SERVICE_TOKEN)."""

    def __init__(self, context: Context, peer: str, url: str, headers: dict[str, str] | None = None):
        self._context, self._peer, self._url, self._headers = context, peer, url, headers

    @property
    def config(self) -> Config:
        return self._context.config

    @property
    def http(self) -> aiohttp.ClientSession:
        return self._context.http

    def peer_url(self, peer: str) -> str:
        return self._url if peer == self._peer else ""

    def peer_headers(self) -> dict[str, str]:
        return self._context.peer_headers() if self._headers is None else dict(self._headers)


class AnswerAsGiven(PeerClient):
    """Every answer comes back as the peer gave it (a refused credential included: the plugin
    manager reports it); only no answer is `PeerFailed`."""

    def __init__(self, addresses: PeerAt, peer: str, service: str, timeout: PeerTimeout):
        super().__init__(addresses, peer, timeout=timeout, service=service)

    def check(self, answer: PeerAnswer) -> PeerAnswer:
        return answer


class ServiceAnswered(Exception):
    """A service answered its introspection with an error."""


def find_plugin(installed: list[InstalledPlugin], name: str) -> InstalledPlugin:
    for row in installed:
        if row.name == name:
            return row
    raise NotFound(f"No installed plugin is named {name!r}.", error_type="unknown_plugin",
                   hint="GET /api/v1/plugins lists the installed plugins.")


def check_can_enable(row: InstalledPlugin, spec: ServiceSpec, by_name: dict[str, InstalledPlugin]) -> None:
    if row.error is not None:
        raise Conflict(f"Plugin {row.name!r} cannot be enabled: it fails to import "
                       f"({row.error['type']}: {row.error['message']}).", error_type="plugin_broken",
                       hint="Fix or reinstall its distribution first.")
    if not row.enabled:
        raise Conflict(f"Plugin {row.name!r} is switched off for every service by configuration.",
                       error_type="plugin_disabled_by_configuration",
                       hint=f"Set [plugins.{row.name}] enabled = true first.")
    for dependency in row.depends:
        needed = by_name.get(dependency)
        if needed is None or needed.error is not None or not needed.enabled or dependency not in spec.plugins:
            why = ("is not installed" if needed is None else "fails to import" if needed.error is not None
                   else "is switched off by configuration" if not needed.enabled
                   else f"is not loaded by {spec.id}")
            raise Conflict(f"Plugin {row.name!r} depends on {dependency!r}, which {why}.",
                           error_type="dependency_missing",
                           hint=f"Enable {dependency!r} for {spec.id} first." if needed is not None
                           else f"Install the distribution that publishes {dependency!r}.",
                           extra={"dependency": dependency})


def check_can_disable(row: InstalledPlugin, spec: ServiceSpec, by_name: dict[str, InstalledPlugin],
                      own_service: str) -> None:
    dependents = [other for other in spec.plugins
                  if other != row.name and (entry := by_name.get(other)) is not None and entry.enabled
                  and row.name in entry.depends]
    if dependents:
        raise Conflict(f"Plugin {row.name!r} is needed by {', '.join(map(repr, dependents))} in {spec.id}.",
                       error_type="dependency_in_use",
                       hint=f"Disable {', '.join(map(repr, dependents))} for {spec.id} first.",
                       extra={"dependents": dependents})
    if spec.id == own_service and row.name == "plugin_manager":
        raise Conflict("The plugin manager cannot disable itself.", error_type="dependency_in_use",
                       hint=f"Edit DATA_DIR/{OVERRIDE_FILE} instead.", extra={"dependents": []})


def plugin_view(row: InstalledPlugin, states: list[ServiceState]) -> dict:
    """The installed plugin with what each service reports of it: every service configured to
    load it, and any running service that loaded it."""
    reports = []
    for state in states:
        configured = row.name in state.spec.plugins
        entry = state.loaded.get(row.name)
        if entry is None and not configured:
            continue
        report = {"service": state.spec.id, "state": state.state, **EMPTY_DETAILS}
        if state.state != "running":
            report.update(loaded=None, reason=f"the service is {state.state}")
        elif entry is not None:
            reported = entry.get("reported", {})
            report.update(loaded=True, reason=None, routes=entry["routes"], ws_types=entry["ws_types"],
                          ws_server_types=entry["ws_server_types"], jobs=entry["jobs"],
                          tools=reported.get("tools", []), migrations=entry["migrations"],
                          provides=entry["provides"], reported=reported)
        else:
            report.update(loaded=False, reason=state.skipped.get(row.name) or (
                "not loaded by the running service: it started before the configuration named it "
                "(a restart is pending)"))
        reports.append(report)
    return {**row.summary(), "service_reports": reports}
