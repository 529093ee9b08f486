"""The stack under soak: the console and its eight services on free ports, with the stub model
beside them; started, listed and stopped over the console's own API."""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench.support import free_port, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
JWT_SECRET = "bench-soak-jwt-secret-" + "s" * 32
SERVICE_TOKEN = "bench-soak-service-token"
ADMIN_PASSWORD = "bench-soak-admin"


def call(base: str, method: str, path: str, timeout: float = 60) -> dict:
    request = urllib.request.Request(base + path, data=b"" if method == "POST" else None, method=method)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"{}")


@dataclass
class Stack:
    console: str
    process: subprocess.Popen
    model: subprocess.Popen
    directory: Path
    gateway: str = ""
    ports: dict[str, int] = field(default_factory=dict)

    def services(self) -> list[dict]:
        return call(self.console, "GET", "/api/services", timeout=10)["services"]


def start_stack(directory: Path, database_url: str | None) -> Stack:
    conf = directory / "conf"
    shutil.copytree(ROOT / "conf", conf)
    table = conf / "services.toml"
    table.write_text(re.sub(r"(?m)^port = \d+$", lambda _: f"port = {free_port()}", table.read_text()))
    model_port = free_port()
    model_log = (directory / "model.log").open("wb")
    model = subprocess.Popen([sys.executable, "-m", "bench.soak.run", "--serve-model", str(model_port)], cwd=ROOT,
                             stdout=model_log, stderr=subprocess.STDOUT)
    environ = {name: value for name, value in os.environ.items()
               if not name.endswith("_URL") and name not in ("DATA_DIR", "CONSOLE_TOKEN")}
    environ.update({
        "GATEWAY_CONF_DIR": str(conf), "DATA_DIR": str(directory / "data"), "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "JWT_SECRET": JWT_SECRET, "SERVICE_TOKEN": SERVICE_TOKEN, "CHAT_FOR_ALL_USERS": "true",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1", "OPENAI_API_KEY": "soak",
        "DEFAULT_MODEL": "soak-model", "HF_HUB_OFFLINE": "1",
    })
    if database_url:
        environ["DATABASE_URL"] = database_url
    port = free_port()
    console = f"http://127.0.0.1:{port}"
    log = (directory / "console.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)], env=environ, cwd=ROOT,
                               stdout=log, stderr=subprocess.STDOUT)
    process.log_path = directory / "console.log"  # type: ignore[attr-defined]
    stack = Stack(console, process, model, directory)
    wait_until_up(console + "/api/health", process, 60)
    wait_until_up(f"http://127.0.0.1:{model_port}/v1/models", model, 30)
    services = [row["id"] for row in stack.services()]
    # The first start of the embedded database (when used) is not raced: the memory service first.
    call(console, "POST", f"/api/services/{services[0]}/start", timeout=300)
    with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
        list(pool.map(lambda service: call(console, "POST", f"/api/services/{service}/start", timeout=300),
                      services[1:]))
    stack.ports = {row["id"]: row["port"] for row in stack.services()}
    stack.gateway = f"http://127.0.0.1:{stack.ports['gateway']}"
    wait_for_every_worker(stack.gateway, conf / "services.toml")
    return stack


def wait_for_every_worker(gateway: str, table: Path, timeout: float = 180) -> None:
    """The gateway's workers start one after the other and the console calls it started with
    the first: the load must not begin before every worker takes connections, or the devices'
    WebSockets and keep-alive connections all stay on the first one."""
    sys.path.insert(0, str(ROOT))
    from gateway.serving import WORKER_HEADER
    from gateway.services import load_services
    from gateway.worker_count import worker_count

    spec = next(spec for spec in load_services(table) if spec.id == "gateway")
    expected = worker_count(spec, None)
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < expected and time.monotonic() < deadline:
        with urllib.request.urlopen(gateway + "/api/v1/health", timeout=10) as answer:  # a new connection each time
            seen.add(answer.headers.get(WORKER_HEADER, ""))
        time.sleep(0.05)
    print(f"soak: {len(seen)} of the gateway's {expected} workers answering", flush=True)


def stop_stack(stack: Stack) -> None:
    try:
        services = [row["id"] for row in stack.services()]
        with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
            list(pool.map(lambda service: call(stack.console, "POST", f"/api/services/{service}/stop", timeout=90),
                          services))
    except OSError:
        pass  # the console's own stop still stops them
    for process in (stack.process, stack.model):
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
