"""The running console, as the command line finds it: DATA_DIR/console/console.json (its pid,
host and port), its REST API called with the console's credential, and starting it in the
background (its output in DATA_DIR/console/console.log)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import click
import psutil

from gateway.config import PROJECT_ROOT, Config

from .app import console_credential, is_loopback, resolve_port
from .logstore import LogStore

CONSOLE_START_TIMEOUT = 30.0


class ConsoleHandle:
    """Where the background console is and how to call it."""

    def __init__(self, config: Config, port: int | None = None):
        self.config = config
        self.directory = config.data_dir / "console"
        self.state_file = self.directory / "console.json"
        self.log_file = self.directory / "console.log"
        recorded = self.recorded() if self.pid() else {}  # a stale record says nothing
        self.host = recorded.get("host") or config.settings.console.host
        self.port = port or recorded.get("port") or resolve_port(config, None)

    def recorded(self) -> dict:
        try:
            record: dict = json.loads(self.state_file.read_text())
            return record
        except (OSError, ValueError):
            return {}

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def pid(self) -> int | None:
        """The recorded pid, when that process is still our console (pids are reused)."""
        pid = self.recorded().get("pid")
        if not pid:
            return None
        try:
            cmdline = psutil.Process(pid).cmdline()
        except psutil.Error:
            return None
        return pid if "console" in " ".join(cmdline) and "serve" in cmdline else None

    def request(self, method: str, path: str, timeout: float | None = 10.0) -> tuple[int, dict]:
        request = urllib.request.Request(self.url + path, method=method)
        # The configured CONSOLE_TOKEN (any address), or off loopback the administrator password,
        # which may be the generated one: load the secrets only then.
        config = self.config if is_loopback(self.host) else Config.load()
        credential = console_credential(config, self.host)
        if credential:
            request.add_header("Authorization", f"Bearer {credential}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            try:
                return error.code, json.loads(error.read() or b"{}")
            except ValueError:
                return error.code, {"error": error.reason}

    def healthy(self) -> bool:
        try:
            status, body = self.request("GET", "/api/health", timeout=2)
        except (OSError, ValueError):
            return False
        return status == 200 and body.get("status") == "ok"

    def running(self) -> bool:
        return self.pid() is not None and self.healthy()


def spawn_console(handle: ConsoleHandle) -> int:
    handle.directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "console", "serve", "--host", handle.host, "--port", str(handle.port)]
    options: dict = {}
    if sys.platform != "win32":  # (os.name == "posix" everywhere else; mypy reads this test)
        options["start_new_session"] = True  # survives the terminal that started it
    else:
        options["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS
    with open(handle.log_file, "ab") as output:
        # DATA_DIR made absolute: the console runs from the project root, the command from anywhere.
        environ = {**os.environ, "DATA_DIR": str(handle.config.data_dir)}
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   cwd=str(PROJECT_ROOT), env=environ, **options)
    handle.state_file.write_text(json.dumps({"pid": process.pid, "host": handle.host, "port": handle.port}))
    deadline = time.monotonic() + CONSOLE_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = LogStore(handle.directory).get("console").tail_blocking(15).lines
            raise click.ClickException(f"the console exited with code {process.returncode} while starting:\n"
                                       + "\n".join(tail))
        if handle.healthy():
            return process.pid
        time.sleep(0.2)
    raise click.ClickException(f"the console did not answer {handle.url}/api/health within "
                               f"{CONSOLE_START_TIMEOUT:g}s; see {handle.log_file}")

