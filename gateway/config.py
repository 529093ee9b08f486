"""Configuration: `conf/default.toml`, then a file named by GATEWAY_CONFIG, then the
environment, then explicit overrides (tests). Later sources win.

Values are kept as a nested dict of sections. The core's own are read through the typed view
`Config.settings` (gateway/core_settings.py); a plugin's `[plugins.<name>]` reaches it as its
own settings class (gateway/plugins.py), so the core needs to know no feature's settings.
"""
from __future__ import annotations

import copy
import functools
import json
import logging
import os
import secrets
import sys
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .core_settings import CoreSettings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("gateway.config")


def conf_dir() -> Path:
    return Path(os.environ.get("GATEWAY_CONF_DIR") or PROJECT_ROOT / "conf")


def _to_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {value!r} (use true or false)")


# Environment variable -> (section.key, parser). The names are a stable interface. These are the
# core's own; a plugin declares its features' variables (`Plugin.environment`), read when a
# service loads it (`Config.adopt`).
Environment = Mapping[str, tuple[str, Callable[[str], Any]]]
ENVIRONMENT: dict[str, tuple[str, Callable[[str], Any]]] = {
    "DATA_DIR": ("core.data_dir", str),
    "PUBLIC_BASE_URL": ("core.public_base_url", str),
    "MODEL_IDLE_SECONDS": ("core.model_idle_seconds", float),
    "DATABASE_URL": ("database.url", str),
    "REDIS_URL": ("bus.redis_url", str),
    "QDRANT_URL": ("vectors.qdrant_url", str),
    "QDRANT_API_KEY": ("vectors.qdrant_api_key", str),
    "EMBEDDINGS_BASE_URL": ("embeddings.base_url", str),
    "EMBEDDINGS_MODEL": ("embeddings.model", str),
    "EMBEDDINGS_API_KEY": ("embeddings.api_key", str),
    "EMBEDDINGS_DIMENSION": ("embeddings.dimension", int),
    "S3_ENDPOINT": ("blobs.s3_endpoint", str),
    "S3_BUCKET": ("blobs.s3_bucket", str),
    "S3_ACCESS_KEY": ("blobs.s3_access_key", str),
    "S3_SECRET_KEY": ("blobs.s3_secret_key", str),
    "ADMIN_USERNAME": ("auth.admin_username", str),
    "ADMIN_PASSWORD": ("auth.admin_password", str),
    "JWT_SECRET": ("auth.jwt_secret", str),
    "REGISTRATION_ENABLED": ("auth.registration_enabled", _to_bool),
    "REGISTRATION_VERIFY_CODE": ("auth.registration_verify_code", str),
    "CHAT_FOR_ALL_USERS": ("auth.chat_for_all_users", _to_bool),
    "SERVICE_TOKEN": ("auth.service_token", str),
    "GATEWAY_URL": ("peers.gateway_url", str),
    "AI_CORE_URL": ("peers.ai_core_url", str),
    "IOT_SERVICE_URL": ("peers.iot_service_url", str),
    "MEMORY_SERVICE_URL": ("peers.memory_service_url", str),
    "VOICE_SERVICE_URL": ("peers.voice_service_url", str),
    "PLATFORM_BRIDGE_URL": ("peers.platform_bridge_url", str),
    "PLUGIN_MANAGER_URL": ("peers.plugin_manager_url", str),
    "CONSOLE_PORT": ("console.port", int),
}

# Secrets that are generated into DATA_DIR/secrets.json when left unset. Never defaulted.
GENERATED_SECRETS: dict[str, Callable[[], str]] = {
    "auth.jwt_secret": lambda: secrets.token_urlsafe(48),
    "auth.admin_password": lambda: secrets.token_urlsafe(12),
    "auth.service_token": lambda: secrets.token_urlsafe(32),
    "auth.registration_verify_code": lambda: "".join(secrets.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
                                                     for _ in range(6)),
}
# Shown once on the terminal when generated, so the operator can log in.
ANNOUNCED_SECRETS = {"auth.admin_password": "administrator password"}


class ConfigError(Exception):
    """Configuration that cannot be used; the message says which setting and why."""


def _merge(base: dict, extra: Mapping) -> dict:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _set_dotted(target: dict, dotted: str, value: Any) -> None:
    """`section.key`, or a plugin's `plugins.<name>.key`: the tables on the way made as needed; a
    table given for a table (`plugins.<name>`) is merged into it, key by key."""
    *tables, key = dotted.split(".")
    for table in tables:
        target = target.setdefault(table, {})
    if isinstance(value, Mapping) and isinstance(target.get(key), dict):
        _merge(target[key], value)
    else:
        target[key] = value


def _given_names(overrides: Mapping, prefix: str = "") -> Iterator[str]:
    """The dotted names of the caller's settings, those inside a table it gave among them (a
    plugin's variables, read later by `Config.adopt`, replace none of them)."""
    for name, value in overrides.items():
        dotted = f"{prefix}{name}"
        if "." in dotted:
            yield dotted
        if isinstance(value, Mapping):
            yield from _given_names(value, f"{dotted}.")


def _get_dotted(values: Mapping, dotted: str) -> Any:
    """The value at `dotted`, or None where a table on the way or the key is missing."""
    found: Any = values
    for part in dotted.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return None
        found = found[part]
    return found


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None


@functools.cache
def _defaults(directory: Path) -> dict:
    """default.toml's values, read once per conf directory."""
    return _read_toml(directory / "default.toml")


class Config:
    """Read-only view over the merged configuration."""

    def __init__(self, values: dict, environ: Mapping[str, str] | None = None,
                 overridden: frozenset[str] = frozenset(), generate_secrets: bool = False):
        self._values = values
        self._environ = dict(environ or {})  # a Config built from values alone reads no variable
        self._overridden = overridden  # dotted keys the caller set, which no variable replaces
        self._generate_secrets = generate_secrets
        self._settings: CoreSettings | None = None  # built on first use, dropped when values change

    @classmethod
    def load(cls, overrides: Mapping | None = None, environ: Mapping[str, str] | None = None,
             generate_secrets: bool = True) -> "Config":
        environ = os.environ if environ is None else environ
        values = _read_toml(conf_dir() / "default.toml")
        if environ.get("GATEWAY_CONFIG"):
            _merge(values, _read_toml(Path(environ["GATEWAY_CONFIG"])))
        _apply_environment(values, ENVIRONMENT, environ, frozenset())
        for dotted, value in (overrides or {}).items():
            if "." in dotted:
                _set_dotted(values, dotted, value)
            else:
                _merge(values, {dotted: value})
        overridden = frozenset(_given_names(overrides or {}))
        config = cls(values, environ, overridden, generate_secrets)
        if generate_secrets:
            config._fill_generated_secrets(GENERATED_SECRETS)
        config.settings  # a value of the wrong type stops the start, naming the key
        return config

    def adopt(self, environment: "Environment", generated: Mapping[str, Callable[[], str]],
              former: Mapping[str, str] | None = None) -> None:
        """A plugin's own variables and generated secrets, read when a service loads it: a
        variable takes precedence over the files, and a setting the caller gave over both.
        `former` maps the dotted names an earlier release kept the plugin's settings under (in
        a core section) to their own: a value still found there, in a file, the caller's
        settings or DATA_DIR/secrets.json, is used while the own name is unset."""
        former = former or {}
        overridden = self._overridden | {own for old, own in former.items() if old in self._overridden}
        for old, own in former.items():
            value = self.get(old)
            if value not in (None, "") and self.get(own) is None:
                _set_dotted(self._values, own, value)
                log.warning("%s is read as %s: move it there (the old name will stop working)", old, own)
        _apply_environment(self._values, environment, self._environ, overridden)
        self._settings = None
        if generated and self._generate_secrets:
            self._fill_generated_secrets(generated, {own: old for old, own in former.items()})

    @property
    def settings(self) -> CoreSettings:
        """The core's settings, typed and checked (gateway/core_settings.py); rebuilt after a
        plugin's variables or generated secrets change the values."""
        if self._settings is None:
            # Over default.toml's values, so that a Config made from a few values has every key.
            values = _merge(copy.deepcopy(_defaults(conf_dir())), self._values)
            try:
                self._settings = CoreSettings.from_values(values)
            except ValueError as error:
                raise ConfigError(str(error)) from None
        return self._settings

    def get(self, dotted: str, default: Any = None) -> Any:
        """One raw value (`section.key`, `plugins.<name>.key`). Outside this module and
        core_settings.py, read `settings` (a plugin: its registrar's) instead:
        tests/core/test_core_settings.py keeps dotted reads out of the services' code."""
        value = _get_dotted(self._values, dotted)
        return default if value is None else value

    def plugin_section(self, name: str) -> Any:
        """The raw `[plugins.<name>]` table (a copy), which the plugin's settings class checks
        (gateway/plugins.py); {} when absent."""
        return copy.deepcopy(self._values.get("plugins", {}).get(name, {}))

    @property
    def data_dir(self) -> Path:
        return Path(self.settings.core.data_dir).expanduser().resolve()

    def _fill_generated_secrets(self, generators: Mapping[str, Callable[[], str]],
                                former: Mapping[str, str] | None = None) -> None:
        missing = [dotted for dotted in generators if not self.get(dotted)]
        if not missing:
            return
        stored = load_or_create_secrets(self.data_dir, missing, generators, former)
        for dotted in missing:
            _set_dotted(self._values, dotted, stored[dotted])
        self._settings = None


def _apply_environment(values: dict, environment: "Environment", environ: Mapping[str, str],
                       overridden: frozenset[str]) -> None:
    for name, (dotted, parse) in environment.items():
        raw = environ.get(name)
        if raw is None or raw == "" or dotted in overridden:
            continue
        try:
            _set_dotted(values, dotted, parse(raw))
        except ValueError as error:
            raise ConfigError(f"environment variable {name}: {error}") from None


def load_or_create_secrets(data_dir: Path, wanted: list[str],
                           generators: Mapping[str, Callable[[], str]] | None = None,
                           former: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the stored secrets, generating the missing ones under an exclusive file lock so
    that services starting together in one DATA_DIR agree on one value. A secret an earlier
    release stored under another name (`former`: name -> earlier name) is kept, copied to its
    name (the earlier entry stays, for that release and its backups)."""
    import fcntl

    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "secrets.json"
    lock_path = data_dir / ".secrets.lock"
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            stored = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError(f"{path} cannot be read ({error}); fix or remove it") from None
        earlier = {dotted: (former or {}).get(dotted, "") for dotted in wanted}
        renamed = [dotted for dotted in wanted if not stored.get(dotted) and stored.get(earlier[dotted])]
        for dotted in renamed:
            stored[dotted] = stored[earlier[dotted]]
        created = [dotted for dotted in wanted if not stored.get(dotted)]
        if created or renamed:
            for dotted in created:
                stored[dotted] = (generators or GENERATED_SECRETS)[dotted]()
            temporary = path.with_suffix(".tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                json.dump(stored, handle, indent=2)
            os.chmod(temporary, 0o600)
            os.replace(temporary, path)
            for dotted in created:
                if dotted in ANNOUNCED_SECRETS:
                    print(f"Generated {ANNOUNCED_SECRETS[dotted]}: {stored[dotted]} "
                          f"(kept in {path}; set ADMIN_PASSWORD to choose your own)",
                          file=sys.stderr, flush=True)
        return stored
