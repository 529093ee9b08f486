"""Starting and stopping the benchmarks' servers: each in its own process with its log in the
run's directory, the gateway either as the bare app or as `gateway serve --workers N`."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bench.chat.servers import JWT_SECRET, ROOT, SERVICE_TOKEN
from bench.support import free_port, wait_until_up

class Processes:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.running: list[subprocess.Popen] = []

    def start(self, name: str, *args: str, log_name: str | None = None, root: Path = ROOT) -> subprocess.Popen:
        """`root`: the checkout whose code the server runs (`--only compare` starts another's)."""
        return self.start_command(log_name or name, [sys.executable, "-m", "bench.chat.run", "--serve", name, *args],
                                  root=root)

    def start_command(self, name: str, command: list[str], environment: dict[str, str] | None = None,
                      root: Path = ROOT) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "w")
        process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=environment)
        process.log_path = self.log_dir / f"{name}.log"
        self.running.append(process)
        return process

    def stop(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # run_app's graceful shutdown
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process in self.running:
            self.running.remove(process)

    def stop_all(self) -> None:
        for process in reversed(list(self.running)):
            self.stop(process)


def access_token(user_id: str, admin: bool = False) -> str:
    import jwt

    now = int(time.time())
    return jwt.encode({"sub": user_id, "username": user_id, "nickname": user_id, "adm": admin, "typ": "access",
                       "iat": now, "exp": now + 6 * 3600, "jti": uuid.uuid4().hex}, JWT_SECRET, algorithm="HS256")


# The gateway of conf/services.toml with the plugins the relay run builds (tokens, sessions,
# files, the AI core client, chat).
BENCH_SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {port}
plugins = ["auth_tokens", "sessions", "files", "ai_core_client", "chat"]
workers = "auto"
"""


def auto_workers_here() -> int:
    """What the bench's `workers = "auto"` resolves to on this machine, as `gateway serve` decides
    it with no `--workers` (the embedded bus: a redis-server at hand or not)."""
    import tempfile

    from gateway.embedded_bus import redis_server_binary
    from gateway.services import get_service
    from gateway.worker_count import worker_count

    with tempfile.TemporaryDirectory() as scratch:
        table = Path(scratch) / "services.toml"
        table.write_text(BENCH_SERVICES.format(port=1))
        return worker_count(get_service("gateway", table), None, bus_at_hand=redis_server_binary() is not None)


def start_gateway_workers(processes: Processes, workers: int | None, port: int, database_url: str,
                          ai_core_url: str, data_dir: Path) -> subprocess.Popen:
    """`gateway serve --service gateway --workers N` configured through its environment, on the
    embedded bus (no REDIS_URL) as a default installation runs; `workers` None: no `--workers`,
    the service table's "auto"."""
    conf = data_dir / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "conf" / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text(BENCH_SERVICES.format(port=port))
    environment = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL")}
    environment.update(GATEWAY_CONF_DIR=str(conf), DATA_DIR=str(data_dir / "data"), DATABASE_URL=database_url,
                       AI_CORE_URL=ai_core_url, JWT_SECRET=JWT_SECRET, SERVICE_TOKEN=SERVICE_TOKEN,
                       ADMIN_PASSWORD="bench-admin-password", WEBHOOK_KEY="bench-webhook",
                       REGISTRATION_VERIFY_CODE="BENCH1", CHAT_FOR_ALL_USERS="true")
    return processes.start_command(f"gateway-{workers or 'auto'}-workers",
                                   [sys.executable, "-m", "gateway", "--log-level", "warning", "serve", "--service",
                                    "gateway", *(["--workers", str(workers)] if workers else [])], environment)


@dataclass
class Relays:
    """The mock AI core and the two relays in front of it (the bare one and the gateway app)."""
    mock_port: int
    bare_port: int
    gateway_port: int
    processes: dict[str, subprocess.Popen]  # "mock", "bare relay", "gateway"

    @property
    def mock_url(self) -> str:
        return f"http://127.0.0.1:{self.mock_port}"

    @property
    def pids(self) -> dict[str, int]:
        """The relays' processes, by target."""
        return {name: process.pid for name, process in self.processes.items() if name != "mock"}


GATEWAY_WS_URL = "http://127.0.0.1:{port}/ws/chat?token={{token}}&session_id={{session}}"


def start_gateway_app(processes: Processes, port: int, database_url: str, mock_url: str, data_dir: Path,
                      root: Path = ROOT, log_name: str | None = None) -> subprocess.Popen:
    """The gateway app of checkout `root` in its own process, once it answers."""
    gateway = processes.start("gateway", "--port", str(port), "--database-url", database_url, "--ai-core-url",
                              mock_url, "--data-dir", str(data_dir), log_name=log_name, root=root)
    wait_until_up(f"http://127.0.0.1:{port}/bench-health", gateway, 120)
    return gateway


@contextlib.contextmanager
def relays(processes: Processes, database_url: str, gateway_data: Path) -> Iterator[Relays]:
    """The mock, the bare relay and the gateway app, each in its own process; stopped on leaving."""
    mock_port, bare_port, gateway_port = free_port(), free_port(), free_port()
    mock_url = f"http://127.0.0.1:{mock_port}"
    started: dict[str, subprocess.Popen] = {}
    try:
        started["mock"] = processes.start("mock", "--port", str(mock_port))
        wait_until_up(f"{mock_url}/health", started["mock"], 30)
        started["bare relay"] = processes.start("bare-relay", "--port", str(bare_port), "--ai-core-url", mock_url)
        wait_until_up(f"http://127.0.0.1:{bare_port}/bench-health", started["bare relay"], 30)
        started["gateway"] = start_gateway_app(processes, gateway_port, database_url, mock_url, gateway_data)
        yield Relays(mock_port, bare_port, gateway_port, started)
    finally:
        for process in reversed(list(started.values())):
            processes.stop(process)
