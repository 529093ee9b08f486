"""The core's own settings as typed, frozen dataclasses: one per section of conf/default.toml,
read as attributes mypy checks (`config.settings.core.shutdown_timeout`) instead of dotted
strings.

The defaults live in conf/default.toml alone: the classes declare none (but for values the code
itself sets at run time), and `Config.settings` builds the view from that file's values merged
with the Config's own, so a Config made from a few values (tests) still has every key. Each
value is checked against its declared type when the view is built; a wrong one raises
ValueError naming `section.key` (ConfigError by the time it leaves Config). An unknown key is
no error: a plugin may add its own through `Plugin.environment`.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar


@dataclass(frozen=True)
class CoreSection:
    data_dir: str
    max_body_bytes: int
    shutdown_timeout: float
    http_connection_limit: int
    event_loop: str
    public_base_url: str
    listen_hosts: dict[str, str]
    model_idle_seconds: float
    malloc_arenas: int


@dataclass(frozen=True)
class DatabaseSection:
    url: str
    pool_min: int
    pool_max: int
    pool_idle_seconds: float


@dataclass(frozen=True)
class BusSection:
    redis_url: str
    max_connections: int
    prefix: str


@dataclass(frozen=True)
class VectorsSection:
    qdrant_url: str
    qdrant_api_key: str
    timeout: float
    engine: str
    path: str
    chinese_tokens: str
    idf_scope: str
    bm25_k1: float
    bm25_b: float
    bm25_avg_len: float
    fusion: str
    candidates: int
    rrf_k: float
    dense_weight: float
    lexical_weight: float
    # Run time only, not in default.toml: the socket of the parent's store, which `gateway serve
    # --workers N` hands each worker (gateway/shared_vectors.py; it answers the offline embeddings
    # too, gateway/shared_embeddings.py); None outside such a worker.
    shared_socket: str | None = None
    # Run time only: set in a rolling restart's replacement (`gateway serve --ready-file`), whose
    # embedded engine waits for the process it replaces to let go of the directory.
    take_over: bool = False


@dataclass(frozen=True)
class EmbeddingsSection:
    base_url: str
    model: str
    api_key: str
    dimension: int
    query_prefix: str
    passage_prefix: str
    batch_size: int
    threads: int
    timeout: float


@dataclass(frozen=True)
class BlobsSection:
    s3_endpoint: str
    s3_bucket: str
    s3_access_key: str
    s3_secret_key: str
    s3_region: str


@dataclass(frozen=True)
class AuthSection:
    admin_username: str
    admin_password: str
    jwt_secret: str
    registration_enabled: bool
    registration_verify_code: str
    chat_for_all_users: bool
    service_token: str
    access_token_lifetime: int
    refresh_token_lifetime: int


@dataclass(frozen=True)
class PeersSection:
    gateway_url: str
    ai_core_url: str
    iot_service_url: str
    memory_service_url: str
    voice_service_url: str
    plugin_manager_url: str
    platform_bridge_url: str
    connect_timeout: float

    def url_of(self, peer: str) -> str:
        """`<peer>_url` (e.g. "ai_core"), no trailing slash; "" for a peer with no such key."""
        key = f"{peer}_url"
        return str(getattr(self, key)).rstrip("/") if key in _names(PeersSection) else ""


@dataclass(frozen=True)
class FetchSection:
    allow_private: bool
    allow_hosts: list[str]
    model_hosts: list[str]
    timeout: float
    max_bytes: int
    max_redirects: int

    def hosts_for(self, purpose: str) -> list[str]:
        """`<purpose>_hosts`: what one purpose's fetches may reach besides `allow_hosts`. A
        purpose is declared in default.toml, so an unknown one is the caller's mistake."""
        key = f"{purpose}_hosts"
        if key not in _names(FetchSection):
            raise ValueError(f"[fetch] has no {key}: declare it in conf/default.toml and FetchSection")
        hosts: list[str] = getattr(self, key)
        return hosts


@dataclass(frozen=True)
class ConsoleSection:
    port: int
    host: str
    token: str
    health_timeout: float
    stop_timeout: float
    build_timeout: float
    restart_on_exit: bool
    restart_backoff_initial: float
    restart_backoff_max: float
    log_max_bytes: int
    log_backups: int
    performance_interval: float
    performance_history: int
    proxy_max_body_bytes: int


@dataclass(frozen=True)
class BackupSection:
    every: str
    keep: int
    directory: str
    passphrase_file: str


@dataclass(frozen=True)
class CoreSettings:
    """Every section of the core's configuration, typed (`Config.settings`)."""

    core: CoreSection
    database: DatabaseSection
    bus: BusSection
    vectors: VectorsSection
    embeddings: EmbeddingsSection
    blobs: BlobsSection
    auth: AuthSection
    peers: PeersSection
    fetch: FetchSection
    console: ConsoleSection
    backup: BackupSection

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> "CoreSettings":
        """The typed view of every core key's value (`Config.settings` passes default.toml's
        under its own); a value of the wrong type raises ValueError naming `section.key` and
        the type it should have."""
        sections = {}
        for name, section_class in typing.get_type_hints(cls).items():
            raw = values.get(name, {})
            if not isinstance(raw, Mapping):
                raise ValueError(f"[{name}] must be a table of settings, not {raw!r}")
            sections[name] = _section(section_class, name, raw)
        return cls(**sections)


@functools.cache
def _names(section_class: type) -> frozenset[str]:
    return frozenset(item.name for item in dataclasses.fields(section_class))


T = TypeVar("T")


def _section(section_class: type[T], name: str, raw: Mapping[str, Any]) -> T:
    hints = typing.get_type_hints(section_class)
    values = {}
    for item in dataclasses.fields(section_class):  # type: ignore[arg-type]  # a dataclass
        dotted = f"{name}.{item.name}"
        if item.name in raw:
            values[item.name] = checked(raw[item.name], hints[item.name], dotted)
        elif item.default is dataclasses.MISSING:
            raise ValueError(f"{dotted} is not set: conf/default.toml must give every core setting a value")
    return section_class(**values)


def checked(value: Any, expected: Any, dotted: str) -> Any:
    """`value` as `expected` (an int is taken where a float is declared), else ValueError."""
    origin, arguments = typing.get_origin(expected), typing.get_args(expected)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in arguments:
            return None
        others = [argument for argument in arguments if argument is not type(None)]
        if len(others) == 1:
            return checked(value, others[0], dotted)
    elif origin is list and isinstance(value, list):
        return [checked(entry, arguments[0], f"{dotted}[{index}]") for index, entry in enumerate(value)]
    elif origin is dict and isinstance(value, Mapping):
        return {checked(key, arguments[0], f"{dotted} key"): checked(entry, arguments[1], f"{dotted}.{key}")
                for key, entry in value.items()}
    elif expected is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    elif expected is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    elif expected in (str, bool) and isinstance(value, expected):
        return value
    raise ValueError(f"{dotted} must be {_describe(expected)}, not {value!r}")


def _describe(expected: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    if expected in names:
        return names[expected]
    origin, arguments = typing.get_origin(expected), typing.get_args(expected)
    if origin is list:
        return f"a list of {_describe(arguments[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin is dict:
        return f"a table of {_describe(arguments[1]).removeprefix('a ').removeprefix('an ')}s"
    return " or ".join("unset" if argument is type(None) else _describe(argument) for argument in arguments)
