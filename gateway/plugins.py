"""The plugin contract, discovery through the `gateway.plugins` entry-point group, and
ordering. Built-in features and third-party ones take exactly this path.

A plugin is an object (usually a module-level instance of `Plugin`) with:

- `name`: unique, the name services use in `conf/services.toml`;
- `version`: shown by `gateway plugins` (defaults to the distribution's version);
- `depends`: names of plugins whose setup must run first;
- `optional_depends`: plugins whose setup runs first when they are loaded in the same service
  (their contracts are then there to `get`); their absence is no error;
- `settings_class`: a `PluginSettings` dataclass declaring `[plugins.<name>]`, checked at start-up;
- `enabled(config)`: whether configuration switches it on (default: `plugins.<name>.enabled`,
  true when unset);
- `setup(registrar)`: called once, registers everything through the registrar;
- `cli()`: optional click commands added to the `gateway` command line.
"""
from __future__ import annotations

import difflib
import importlib.metadata
import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, ClassVar, Generic, Iterable, Mapping, TypeVar

import marshmallow
from aiohttp import web
from aiohttp.typedefs import Middleware

from .config import ENVIRONMENT
from .jobs import JobGroup
from .plugin_settings import PluginSettings, SettingsT

if TYPE_CHECKING:
    import click

    from .config import Config
    from .context import Context
    from .contracts import ContractKey

log = logging.getLogger("gateway.plugins")

ENTRY_POINT_GROUP = "gateway.plugins"
T = TypeVar("T")

WsHandler = Callable[["Any", dict], Awaitable[None]]
Lifespan = Callable[["Context"], AsyncIterator[None]]
JobFactory = Callable[["Context"], Awaitable[None]]
# A section of the service's introspection kept by one plugin for others: {plugin name: [item]}.
Report = Callable[[], "dict[str, list[str]]"]


class PluginError(Exception):
    """A plugin set that cannot start: the message names the plugins and what is wrong."""


class Plugin:
    name: str = ""
    version: str = ""
    depends: tuple[str, ...] = ()
    optional_depends: tuple[str, ...] = ()
    settings_class: "type[PluginSettings] | None" = None
    # Storage the service must open for this plugin: "database", "blobs", "vectors" (with
    # "embeddings"), "embeddings" alone (migrations imply the database).
    uses: tuple[str, ...] = ()
    description: str = ""
    # Environment variables of this plugin's features -> (section.key, parser), and settings
    # generated into DATA_DIR/secrets.json when unset -> their generator (gateway/config.py).
    environment: "ClassVar[Mapping[str, tuple[str, Callable[[str], Any]]]]" = {}
    generated_secrets: "ClassVar[Mapping[str, Callable[[], str]]]" = {}
    # Where an earlier release kept some of these settings (a core section's dotted name) -> their
    # own (`plugins.<name>.key`): a value still found there is used while the own one is unset.
    former_settings: "ClassVar[Mapping[str, str]]" = {}
    # The installed distribution that publishes it (set from the entry point; "" when inline).
    distribution: str = ""

    def enabled(self, config: Config) -> bool:
        section = config.plugin_section(self.name)
        return bool(section.get("enabled", True)) if isinstance(section, dict) else True

    def setup(self, registrar: "Registrar") -> None:  # pragma: no cover - overridden
        raise PluginError(f"plugin {self.name!r} does not define setup()")

    def cli(self) -> "list[click.Command]":
        return []

    def __repr__(self) -> str:
        return f"<plugin {self.name} {self.version}>"


def load_settings(plugin: "Plugin", config: Config) -> PluginSettings:
    """The plugin's validated settings, defaults filled in."""
    raw = config.plugin_section(plugin.name)
    if not isinstance(raw, dict):
        raise PluginError(f"[plugins.{plugin.name}] must be a table of settings, not {raw!r}")
    try:
        return (plugin.settings_class or PluginSettings).load(raw)
    except marshmallow.ValidationError as error:
        problems = "; ".join(f"plugins.{plugin.name}.{key}: "
                             f"{' '.join(map(str, texts)) if isinstance(texts, list) else texts}"
                             for key, texts in sorted(error.normalized_messages().items()))
        raise PluginError(f"invalid settings for plugin {plugin.name!r}: {problems}") from None


@dataclass
class WsMessageType:
    type: str
    handler: WsHandler
    schema: marshmallow.Schema | None
    plugin: str


@dataclass
class WsServerMessage:
    """A frame type the service sends on its WebSocket endpoints, for its AsyncAPI document."""
    type: str
    schema: marshmallow.Schema
    description: str
    plugin: str


@dataclass
class Job:
    name: str
    factory: JobFactory
    plugin: str


@dataclass
class Migrations:
    plugin: str
    package: str
    directory: str


@dataclass
class PluginRecord:
    """What one plugin registered; `gateway plugins` prints these."""
    plugin: Plugin
    routes: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, name)
    ws_types: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    has_migrations: bool = False


class Registrar(Generic[SettingsT]):
    """What a plugin's setup registers with. One per plugin, all writing into one Registry;
    `Registrar[MySettings]` in a plugin's `setup` types its `settings`."""

    def __init__(self, registry: "Registry", plugin: Plugin, context: "Context"):
        self._registry = registry
        self._plugin = plugin
        self.context = context
        self.record = registry.records[plugin.name]
        self._settings: SettingsT = load_settings(plugin, context.config)  # type: ignore[assignment]

    @property
    def config(self) -> Config:
        return self.context.config

    @property
    def settings(self) -> SettingsT:
        """This plugin's own section, `[plugins.<name>]`, validated by its `settings_class`
        with every default filled in."""
        return self._settings

    def routes(self, table: web.RouteTableDef) -> None:
        for route in table:
            if not isinstance(route, web.RouteDef):
                raise PluginError(f"plugin {self._plugin.name!r}: only RouteDef entries are supported")
            methods = [route.method]
            if route.method == "GET" and route.kwargs.get("allow_head", True):
                methods.append("HEAD")
            for method in methods:
                self._registry.claim_route(method, route.path, self._plugin.name)
            name = route.kwargs.get("name") or ""
            self.record.routes.append((route.method, route.path, name))
        self._registry.route_tables.append(table)

    def ws_message(self, type: str, schema: marshmallow.Schema | None = None) -> Callable[[WsHandler], WsHandler]:
        """Decorator: handle WebSocket frames whose `type` is `type`, validated by `schema`."""
        def decorate(handler: WsHandler) -> WsHandler:
            existing = self._registry.ws_types.get(type)
            if existing:
                raise PluginError(f"WebSocket message type {type!r} is registered by both "
                                  f"{existing.plugin!r} and {self._plugin.name!r}")
            self._registry.ws_types[type] = WsMessageType(type, handler, schema, self._plugin.name)
            self.record.ws_types.append(type)
            return handler
        return decorate

    def ws_server_message(self, type: str, schema: marshmallow.Schema | type[marshmallow.Schema],
                          description: str) -> None:
        """Declare a frame type this plugin sends to WebSocket clients, with the marshmallow
        schema of its fields, so the service's AsyncAPI document (`gateway.asyncapi`) lists it
        the way it lists the frames handlers take."""
        existing = self._registry.ws_server_types.get(type)
        if existing:
            raise PluginError(f"WebSocket server message type {type!r} is declared by both "
                              f"{existing.plugin!r} and {self._plugin.name!r}")
        instance = schema() if inspect.isclass(schema) else schema
        self._registry.ws_server_types[type] = WsServerMessage(type, instance, description, self._plugin.name)

    def job(self, name: str, factory: JobFactory) -> None:
        """A background coroutine started with the service and cancelled when it stops."""
        self._registry.jobs.append(Job(f"{self._plugin.name}.{name}", factory, self._plugin.name))
        self.record.jobs.append(name)

    def job_group(self, name: str, *, per: str, redact: bool = False) -> JobGroup:
        """Background loops this plugin starts and stops itself, one `per` item (a poller per
        bot): `group.start(key, coroutine)`, `await group.stop(key)`. Listed by `gateway plugins`
        as `<name> (one per <per>)`; each failure logged once like a declared job's (`redact`: its
        exception's type only); what still runs is cancelled by the core with the jobs."""
        group = JobGroup(f"{self._plugin.name}.{name}", redact=redact)
        self._registry.job_groups.append(group)
        self.record.jobs.append(f"{name} (one per {per})")
        return group

    def migrations(self, package: str, directory: str = "migrations") -> None:
        """Numbered `NNN_name.sql` files inside `package/directory`, applied in order, once."""
        self._registry.migrations.append(Migrations(self._plugin.name, package, directory))
        self.record.has_migrations = True

    def lifespan(self, function: Lifespan) -> None:
        """An async generator run at start (up to its `yield`) and at stop (after it)."""
        self._registry.lifespans.append((self._plugin.name, function))

    def provide(self, key: "ContractKey[T]", implementation: "T") -> None:
        """Provide the contract `key` (declared in this plugin's `contract.py`) to the other
        plugins of this service: `context.contracts.require(key)`."""
        self.context.contracts.provide(key, implementation, owner=self._plugin.name)
        self.record.provides.append(key.name)

    def middleware(self, middleware: Middleware) -> None:
        self._registry.middlewares.append(middleware)

    def app_state(self, key: "web.AppKey[T]", value: "T") -> None:
        """Store `value` on the service's application under the plugin's own typed `key`: its
        handlers read it as `request.config_dict[key]`, the way aiohttp's documentation teaches."""
        if key in self._registry.app_state:
            raise PluginError(f"application key {key!r} is set by both "
                              f"{self._registry.app_state[key][1]!r} and {self._plugin.name!r}")
        self._registry.app_state[key] = (value, self._plugin.name)

    def report(self, section: str, report: Report) -> None:
        """Add `section` to what the service reports it loaded (`GET /api/v1/introspection`)
        for things this plugin keeps on behalf of the others (the AI core's tools, by the plugin
        that added each): `report()` returns {plugin name: [item, ...]} when asked."""
        if any(existing == section for existing, _, _ in self._registry.reports):
            raise PluginError(f"introspection section {section!r} is reported twice "
                              f"(again by {self._plugin.name!r})")
        self._registry.reports.append((section, self._plugin.name, report))


class Registry:
    """Everything the loaded plugins registered, checked for clashes as it is filled."""

    def __init__(self) -> None:
        self.records: dict[str, PluginRecord] = {}
        self.route_tables: list[web.RouteTableDef] = []
        self.route_owners: dict[tuple[str, str], str] = {}
        self.ws_types: dict[str, WsMessageType] = {}
        self.ws_server_types: dict[str, WsServerMessage] = {}
        self.jobs: list[Job] = []
        self.job_groups: list[JobGroup] = []
        self.migrations: list[Migrations] = []
        self.lifespans: list[tuple[str, Lifespan]] = []
        self.middlewares: list[Middleware] = []
        self.app_state: dict[web.AppKey, tuple[object, str]] = {}
        self.reports: list[tuple[str, str, Report]] = []  # (section, reporting plugin, report)
        # Plugins the service table names that this service did not load: {name: reason}.
        self.skipped: dict[str, str] = {}

    def claim_route(self, method: str, path: str, owner: str) -> None:
        key = (method, path)
        if key in self.route_owners:
            raise PluginError(f"route {method} {path} is registered by both "
                              f"{self.route_owners[key]!r} and {owner!r}")
        self.route_owners[key] = owner


REGISTRY = web.AppKey("registry", Registry)


def installed_plugins(names: Iterable[str] | None = None) -> dict[str, Plugin]:
    """Plugins published under the entry-point group, by name; only `names` when given, so a
    plugin that fails to import stops only the services that use it."""
    wanted = None if names is None else set(names)
    found: dict[str, Plugin] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if wanted is not None and entry_point.name not in wanted:
            continue
        if entry_point.name in found:
            raise PluginError(f"two installed distributions publish a plugin named {entry_point.name!r}")
        found[entry_point.name] = load_entry_point(entry_point)
    return found


def environment_names() -> set[str]:
    """Every environment variable a service may read: the core's and each installed plugin's."""
    return set(ENVIRONMENT) | {name for plugin in installed_plugins().values() for name in plugin.environment}


def installed_entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def load_entry_point(entry_point: importlib.metadata.EntryPoint) -> Plugin:
    try:
        loaded = entry_point.load()
    except Exception as error:  # a broken plugin must say who it is
        raise PluginError(f"plugin {entry_point.name!r} ({entry_point.value}) failed to import: "
                          f"{error!r}") from error
    plugin: Plugin = loaded() if isinstance(loaded, type) else loaded
    if plugin.name and plugin.name != entry_point.name:
        raise PluginError(f"entry point {entry_point.name!r} publishes a plugin named {plugin.name!r}; "
                          f"the two names must match")
    plugin.name = entry_point.name
    if entry_point.dist is not None:
        plugin.distribution = entry_point.dist.name
        if not plugin.version:
            plugin.version = entry_point.dist.version
    return plugin


def not_installed(name: str, known: set[str]) -> str:
    """The error for a plugin name no installed distribution publishes, with the likely fix."""
    installed = known | {entry_point.name for entry_point in installed_entry_points()}
    closest = difflib.get_close_matches(name, sorted(installed), n=1)
    return (f"plugin {name!r} is not installed"
            + (f"; did you mean {closest[0]!r}?" if closest else "")
            + f" Installed: {', '.join(sorted(installed)) or 'none'}. A plugin that is announced but not "
              f"built yet belongs in `planned` in conf/services.toml.")


def select_plugins(names: Iterable[str], available: dict[str, Plugin], config: Config,
                   planned: Iterable[str] = (), skipped: dict[str, str] | None = None) -> list[Plugin]:
    """The named plugins that are installed and enabled, in dependency order.

    A name that is not installed is skipped with a notice when it is `planned` (announced in
    the service table, not built yet) and an error otherwise, naming the closest installed
    plugin: a misspelt name must not quietly start a service without its feature. A dependency
    that is not among the selected plugins, or a cycle, is an error naming the plugins involved.
    `skipped`, when given, receives each name left out, with the reason."""
    announced = set(planned)
    left_out: dict[str, str] = {} if skipped is None else skipped
    chosen: dict[str, Plugin] = {}
    for name in names:
        plugin = available.get(name)
        if plugin is None:
            if name in announced:
                log.info("plugin %r is planned but not built yet; the service starts without it", name)
                left_out[name] = "planned: not built yet"
                continue
            raise PluginError(not_installed(name, set(available)))
        if not plugin.enabled(config):
            log.info("plugin %r is disabled by configuration", name)
            left_out[name] = f"disabled by configuration ([plugins.{name}] enabled = false)"
            continue
        chosen[name] = plugin
    for plugin in chosen.values():
        missing = [dep for dep in plugin.depends if dep not in chosen]
        if missing:
            raise PluginError(f"plugin {plugin.name!r} depends on {', '.join(map(repr, missing))}, "
                              f"which {'is' if len(missing) == 1 else 'are'} not loaded in this service "
                              f"(not installed, disabled, or not listed)")
    ordered: list[Plugin] = []
    state: dict[str, str] = {}

    def visit(plugin: Plugin, path: list[str]) -> None:
        if state.get(plugin.name) == "done":
            return
        if state.get(plugin.name) == "visiting":
            cycle = path[path.index(plugin.name):] + [plugin.name]
            raise PluginError(f"plugin dependency cycle: {' -> '.join(cycle)}")
        state[plugin.name] = "visiting"
        for dep in plugin.depends + tuple(d for d in plugin.optional_depends if d in chosen):
            visit(chosen[dep], path + [plugin.name])
        state[plugin.name] = "done"
        ordered.append(plugin)

    for plugin in chosen.values():
        visit(plugin, [])
    return ordered
