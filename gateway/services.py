"""The service table, `conf/services.toml`: the eight services, their ports and plugins, in
start order, and the `planned` plugins (announced, not built yet). The console and
`gateway serve` both read it, with the plugins an operator enabled or disabled per service
(the plugin manager) from `DATA_DIR/service-plugins.toml` on top."""
from __future__ import annotations

import fcntl
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .config import ConfigError, conf_dir

# The console's built-in build steps (console/build.py, docs/console.md "Build"); any other item
# of a row's `build` is a command, a list of arguments.
BUILD_STEPS = ("install", "compile", "assets")
BuildItem = str | tuple[str, ...]


@dataclass(frozen=True)
class ServiceSpec:
    id: str
    name: str
    port: int
    plugins: tuple[str, ...] = ()
    health: str = "/api/v1/health"
    depends: tuple[str, ...] = ()
    # What `build` does, in order: built-in step names and commands (argument lists).
    build: tuple[BuildItem, ...] = ()
    # Paths (from the project root) the `assets` step checks: a file exists, a folder is not empty.
    assets: tuple[str, ...] = ()
    # The names in `plugins` that the table announces as planned: skipped, not an error, while
    # no installed distribution publishes them.
    planned: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False)


# In DATA_DIR: per service, the plugins enabled or disabled on top of the service table.
OVERRIDE_FILE = "service-plugins.toml"


def load_services(path: Path | None = None, *, data_dir: Path | None = None) -> list[ServiceSpec]:
    """The service table; with `data_dir`, each service's plugins as `DATA_DIR/service-plugins.toml`
    changes them (what the services really load after a restart)."""
    path = path or conf_dir() / "services.toml"
    overrides = plugin_overrides(data_dir) if data_dir is not None else {}
    try:
        with path.open("rb") as handle:
            table = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read the service table {path}: {error}") from None
    planned = table.get("planned", [])
    if not isinstance(planned, list) or not all(isinstance(name, str) for name in planned):
        raise ConfigError(f"{path}: `planned` must be a list of plugin names")
    services = []
    known: set[str] = set()
    for row in table.get("service", []):
        try:
            plugins = with_overrides(tuple(row.get("plugins", ())), overrides.get(row["id"], {}))
            spec = ServiceSpec(
                id=row["id"], name=row.get("name", row["id"]), port=int(row["port"]),
                plugins=plugins, health=row.get("health", "/api/v1/health"),
                planned=tuple(name for name in plugins if name in planned),
                depends=tuple(row.get("depends", ())), build=build_items(row.get("build", [])),
                assets=string_list(row.get("assets", []), "assets"),
                extra={k: v for k, v in row.items() if k not in {"id", "name", "port", "plugins", "health",
                                                                   "depends", "build", "assets"}})
        except RowError as error:
            raise ConfigError(f"{path}: service {row.get('id')!r}: {error}") from None
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{path}: a [[service]] entry is incomplete or malformed ({error!r})") from None
        if spec.id in known:
            raise ConfigError(f"{path}: service {spec.id!r} is listed twice")
        unknown = [d for d in spec.depends if d not in known]
        if unknown:
            raise ConfigError(f"{path}: service {spec.id!r} depends on {unknown}, which must be listed before it")
        known.add(spec.id)
        services.append(spec)
    return services


class RowError(Exception):
    """A value of a service row that is not what the table takes; the message says what is."""


def string_list(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise RowError(f"`{key}` must be a list of non-empty strings")
    return tuple(value)


def build_items(value: object) -> tuple[BuildItem, ...]:
    """A row's `build`: each item a built-in step's name or a command (a non-empty list of
    arguments, run without a shell)."""
    if not isinstance(value, list):
        raise RowError("`build` must be a list of steps")
    items: list[BuildItem] = []
    for item in value:
        if isinstance(item, str):
            if item not in BUILD_STEPS:
                raise RowError(f"unknown build step {item!r}; the built-in steps are {', '.join(BUILD_STEPS)}, "
                                 f"and a command is a list of arguments, e.g. [\"make\", \"all\"]")
            items.append(item)
        elif isinstance(item, list) and item:
            items.append(string_list(item, "build"))
        else:
            raise RowError(f"a `build` item must be a step name or a non-empty list of arguments, not {item!r}")
    return tuple(items)


def get_service(service_id: str, path: Path | None = None, *, data_dir: Path | None = None) -> ServiceSpec:
    for spec in load_services(path, data_dir=data_dir):
        if spec.id == service_id:
            return spec
    names = ", ".join(s.id for s in load_services(path))
    raise ConfigError(f"unknown service {service_id!r}; the service table lists: {names}")


def with_overrides(plugins: tuple[str, ...], override: dict[str, list[str]]) -> tuple[str, ...]:
    disabled = set(override.get("disable", ()))
    kept = tuple(name for name in plugins if name not in disabled)
    return kept + tuple(name for name in override.get("enable", ()) if name not in kept and name not in disabled)


def plugin_overrides(data_dir: Path) -> dict[str, dict[str, list[str]]]:
    """`DATA_DIR/service-plugins.toml`: {service id: {"enable": [...], "disable": [...]}}."""
    path = data_dir / OVERRIDE_FILE
    try:
        with path.open("rb") as handle:
            table = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}; fix or remove it") from None
    services = table.get("service", {})
    result: dict[str, dict[str, list[str]]] = {}
    for service_id, row in services.items() if isinstance(services, dict) else ():
        lists = {key: row.get(key, []) for key in ("enable", "disable")} if isinstance(row, dict) else {}
        if not lists or not all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in lists.values()):
            raise ConfigError(f"{path}: [service.{service_id!r}] must hold `enable` and `disable` lists "
                              f"of plugin names")
        result[service_id] = lists
    return result


def set_plugin_enabled(data_dir: Path, service_id: str, plugin: str, enabled: bool, *,
                       listed: bool) -> Path:
    """Record in `DATA_DIR/service-plugins.toml` that `service_id` loads `plugin` (or not) from
    its next start; `listed` says whether the service table itself names it. Written whole,
    under a lock, so two changes at once both land."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / OVERRIDE_FILE
    with open(data_dir / ".service-plugins.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        overrides = plugin_overrides(data_dir)
        row = overrides.setdefault(service_id, {"enable": [], "disable": []})
        row["enable"] = [name for name in row["enable"] if name != plugin]
        row["disable"] = [name for name in row["disable"] if name != plugin]
        if enabled and not listed:
            row["enable"].append(plugin)
        elif not enabled and listed:
            row["disable"].append(plugin)
        lines = ["# Written by the plugin manager (docs/plugin-manager.md): the plugins enabled or disabled",
                 "# per service on top of conf/services.toml, from each service's next start.", ""]
        for service, lists in sorted(overrides.items()):
            if lists["enable"] or lists["disable"]:
                lines += [f"[service.{json.dumps(service)}]",
                          f"enable = {json.dumps(lists['enable'])}", f"disable = {json.dumps(lists['disable'])}", ""]
        temporary = path.with_suffix(".tmp")
        temporary.write_text("\n".join(lines))
        os.replace(temporary, path)
    return path
