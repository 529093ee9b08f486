"""The optional container stack of `conf/docker-compose.yml` (PostgreSQL, Redis, Qdrant,
MinIO, NATS) for operators who want real servers instead of the embedded defaults, and the
port checks that tell which of those servers answer. Blocking: call from the CLI or an executor."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from gateway.config import Config, conf_dir
from gateway.core_settings import CoreSettings

# What the database panel and `db:status` check, in this order: name, the setting of its URL,
# the environment variable named as the address's source, the usual local port.
SERVERS: tuple[tuple[str, Callable[[CoreSettings], str] | None, str, int], ...] = (
    ("PostgreSQL", lambda settings: settings.database.url, "DATABASE_URL", 5432),
    ("Redis", lambda settings: settings.bus.redis_url, "REDIS_URL", 6379),
    ("Qdrant", lambda settings: settings.vectors.qdrant_url, "QDRANT_URL", 6333),
    ("MinIO", lambda settings: settings.blobs.s3_endpoint, "S3_ENDPOINT", 9000),
    ("NATS", None, "NATS_URL", 4222),  # nothing here uses NATS yet: only the environment names it
)


class DockerUnavailable(Exception):
    """No docker client, or no engine behind it; the message says which and what to do."""


@dataclass(frozen=True)
class CommandResult:
    code: int
    output: str


def compose_file() -> Path:
    return conf_dir() / "docker-compose.yml"


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def server_addresses(config: Config, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Where each server of SERVERS is expected: the configured URL's host and port, else the
    usual local port (`source` says which)."""
    environ = os.environ if environ is None else environ
    found = []
    for name, setting, variable, default_port in SERVERS:
        url = setting(config.settings) if setting else environ.get(variable)
        host, port, source = "127.0.0.1", default_port, "default"
        if url:
            parts = urlsplit(url if "//" in url else f"//{url}")
            host = parts.hostname or host
            try:
                port = parts.port or default_port
            except ValueError:
                pass
            source = variable
        found.append({"name": name, "host": host, "port": port, "source": source})
    return found


def port_checks(config: Config) -> list[dict]:
    """Blocking (the command line); the console checks the same addresses without blocking."""
    return [{**entry, "open": port_open(entry["host"], entry["port"])} for entry in server_addresses(config)]


def _docker_base() -> list[str]:
    """`docker compose` (the plugin) or the older `docker-compose`, after checking the engine."""
    docker = shutil.which("docker")
    if docker is None:
        raise DockerUnavailable("Docker is not installed (no `docker` on PATH). The services run on "
                                "the embedded defaults without it; install Docker only to use the "
                                "container stack.")
    info = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=30)
    if info.returncode != 0:
        detail = (info.stderr or info.stdout).strip().splitlines()
        reason = detail[-1] if detail else f"`docker info` exited with {info.returncode}"
        raise DockerUnavailable(f"The Docker engine is not available ({reason}). Start the Docker daemon, "
                                f"or keep using the embedded defaults.")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    raise DockerUnavailable("Docker is running but has no compose support (`docker compose` or "
                            "`docker-compose`); install the compose plugin.")


def compose(*arguments: str, timeout: float = 600) -> CommandResult:
    """Run `docker compose -f conf/docker-compose.yml <arguments>` with a fixed argument list."""
    command = [*_docker_base(), "-f", str(compose_file()), "-p", "assistant", *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return CommandResult(completed.returncode, (completed.stdout + completed.stderr).strip())


def stack_up() -> CommandResult:
    return compose("up", "-d")


def stack_down() -> CommandResult:
    return compose("down")


def stack_status() -> CommandResult:
    return compose("ps")
