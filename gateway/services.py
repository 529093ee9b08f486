"""The service table, `conf/services.toml`: the eight services, their ports and plugins, in
start order, and the `planned` plugins (announced, not built yet). The console and
`gateway serve` both read it."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .config import ConfigError, conf_dir


@dataclass(frozen=True)
class ServiceSpec:
    id: str
    name: str
    port: int
    plugins: tuple[str, ...] = ()
    health: str = "/api/v1/health"
    depends: tuple[str, ...] = ()
    build: tuple[str, ...] = ()
    # The names in `plugins` that the table announces as planned: skipped, not an error, while
    # no installed distribution publishes them.
    planned: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False)


def load_services(path: Path | None = None) -> list[ServiceSpec]:
    path = path or conf_dir() / "services.toml"
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
            spec = ServiceSpec(
                id=row["id"], name=row.get("name", row["id"]), port=int(row["port"]),
                plugins=tuple(row.get("plugins", ())), health=row.get("health", "/api/v1/health"),
                planned=tuple(name for name in row.get("plugins", ()) if name in planned),
                depends=tuple(row.get("depends", ())), build=tuple(row.get("build", ())),
                extra={k: v for k, v in row.items() if k not in {"id", "name", "port", "plugins", "health",
                                                                   "depends", "build"}})
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


def get_service(service_id: str, path: Path | None = None) -> ServiceSpec:
    for spec in load_services(path):
        if spec.id == service_id:
            return spec
    names = ", ".join(s.id for s in load_services(path))
    raise ConfigError(f"unknown service {service_id!r}; the service table lists: {names}")
