"""The console's command line: through click's runner, and once for real as
`bin/console.sh start` / `status` / `stop`."""
from __future__ import annotations

import json
import os
import subprocess

import psutil
import pytest
from click.testing import CliRunner

from console.cli import main
from console.logstore import LogStore
from gateway.config import PROJECT_ROOT
from tests.support.servers import free_port


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    # The machine's administrator settings must not leak into what the commands read.
    for name in ("ADMIN_PASSWORD", "CONSOLE_TOKEN", "CONSOLE_PORT"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def test_help_lists_every_command(runner, service_table):
    service_table([{"id": "alpha", "name": "Alpha"}])
    result = runner.invoke(main, ["help"])
    assert result.exit_code == 0, result.output
    for command in ("start", "stop", "status", "logs", "build", "db:start", "db:stop", "db:status", "help"):
        assert f"  {command} " in result.output
    start_help = runner.invoke(main, ["start", "--help"]).output
    assert "--fresh" in start_help and "--build" in start_help and "-p, --port" in start_help


def test_logs_reads_the_service_log_without_a_console(runner, service_table, tmp_path):
    service_table([{"id": "alpha", "name": "Alpha"}])
    service_log = LogStore(tmp_path / "data" / "logs").get("alpha")
    service_log._append("".join(f"line {n}\n" for n in range(1, 31)).encode())
    result = runner.invoke(main, ["logs", "alpha", "3"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["line 28", "line 29", "line 30"]
    paged = runner.invoke(main, ["logs", "alpha", "2", "--offset", "5"])
    assert paged.output.splitlines() == ["line 24", "line 25"]
    unknown = runner.invoke(main, ["logs", "nope"])
    assert unknown.exit_code == 1 and "unknown service 'nope'" in unknown.output


def test_status_without_a_console(runner, service_table):
    service_table([{"id": "alpha", "name": "Alpha"}, {"id": "beta", "name": "Beta"}])
    result = runner.invoke(main, ["status"])
    assert result.exit_code == 0, result.output
    assert "console: not running" in result.output
    assert [line.split()[:2] for line in result.output.splitlines()[2:]] == [["alpha", "stopped"],
                                                                             ["beta", "stopped"]]
    assert "console is not running" in runner.invoke(main, ["stop"]).output


def test_build_without_a_console_runs_only_the_build_steps(runner, service_table, tmp_path):
    import sys

    marker = tmp_path / "built"
    service_table([{"id": "alpha", "name": "Alpha"},
                   {"id": "beta", "name": "Beta",
                    "build": [[sys.executable, "-c", f"open({str(marker)!r}, 'w')"]]}])
    result = runner.invoke(main, ["build"])
    assert result.exit_code == 0, result.output
    assert "alpha: no build step (runs from source)" in result.output and marker.exists()


@pytest.mark.parametrize("command", ["db:start", "db:stop", "db:status"])
def test_db_commands_say_clearly_when_docker_is_missing(runner, service_table, tmp_path, command):
    service_table([{"id": "alpha", "name": "Alpha"}])
    empty = tmp_path / "no-docker-here"
    empty.mkdir()
    result = runner.invoke(main, [command], env={"PATH": str(empty)})
    assert result.exit_code == 1
    assert "Docker is not installed" in result.output
    if command == "db:status":  # the checks that need no Docker still run
        assert "PostgreSQL  127.0.0.1:5432" in result.output and "embedded PostgreSQL" in result.output


@pytest.mark.slow
def test_console_sh_start_status_stop_round_trip(service_table, tmp_path):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    environ = {**os.environ, "CONSOLE_PORT": str(free_port())}
    environ.pop("CONSOLE_TOKEN", None)

    def console_sh(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(PROJECT_ROOT / "bin" / "console.sh"), *arguments], env=environ,
                              capture_output=True, text=True, timeout=180)

    started = console_sh("start")
    state = json.loads((tmp_path / "data" / "console" / "console.json").read_text())
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"console started at http://127.0.0.1:{environ['CONSOLE_PORT']}" in started.stdout
        status = console_sh("status")
        assert status.returncode == 0, status.stderr
        row = next(line.split() for line in status.stdout.splitlines() if line.startswith("alpha"))
        assert row[1] == "running"
        service_pid = int(row[2])
        assert psutil.Process(service_pid).cmdline()[-3:] == ["serve", "--service", "alpha"]
        assert specs[0].port == int(row[4])
    finally:
        stopped = console_sh("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"console stopped (pid {state['pid']})" in stopped.stdout
    assert not psutil.pid_exists(state["pid"]) and not psutil.pid_exists(service_pid)
    assert "[console] stopped (exit code 0)" in (tmp_path / "data" / "logs" / "alpha.log").read_text()


async def test_the_command_line_sends_the_configured_token_on_loopback(service_table, aiohttp_server, monkeypatch):
    """A console with a CONSOLE_TOKEN asks every caller for it, loopback included; the command
    line (`bin/console.sh status`, `restart` ...) sends it."""
    import asyncio

    from console.app import create_console_app
    from console.handle import ConsoleHandle
    from gateway.config import Config

    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    monkeypatch.setenv("CONSOLE_TOKEN", "operator-token")
    server = await aiohttp_server(create_console_app(Config.load(), host="127.0.0.1", specs=specs), host="127.0.0.1")
    handle = ConsoleHandle(Config.load(generate_secrets=False), server.port)
    status, body = await asyncio.to_thread(handle.request, "GET", "/api/services")
    assert status == 200 and [row["id"] for row in body["services"]] == ["alpha"]
    monkeypatch.delenv("CONSOLE_TOKEN")
    status, body = await asyncio.to_thread(handle.request, "GET", "/api/services")
    assert status == 401 and body["errorType"] == "unauthorized"


@pytest.mark.slow
def test_restart_and_restart_rolling_go_through_the_running_console(service_table, tmp_path):
    """`console.sh restart ID [--rolling]` asks the running console; its refusals are said plainly."""
    import sys
    import time
    import urllib.request

    service_table([{"id": "alpha", "name": "Alpha", "workers": 1}])
    port = free_port()
    environ = {**os.environ, "CONSOLE_PORT": str(port)}
    environ.pop("CONSOLE_TOKEN", None)
    log = (tmp_path / "console.out").open("wb")
    console = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)], env=environ,
                               cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        (tmp_path / "data" / "console").mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / "console" / "console.json").write_text(
            json.dumps({"pid": console.pid, "host": "127.0.0.1", "port": port}))
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        runner = CliRunner()
        refused = runner.invoke(main, ["restart", "alpha", "--rolling"])
        assert refused.exit_code == 1 and "alpha is not running" in refused.output, refused.output
        assert runner.invoke(main, ["restart", "nope"]).exit_code != 0

        restarted = runner.invoke(main, ["restart", "alpha"])
        assert restarted.exit_code == 0 and "alpha: restarted, running" in restarted.output, restarted.output
        first = int(restarted.output.rsplit("pid ", 1)[1].rstrip(")\n"))
        rolled = runner.invoke(main, ["restart", "alpha", "--rolling"])
        assert rolled.exit_code == 0 and "alpha: rolling restart done, running" in rolled.output, rolled.output
        assert int(rolled.output.rsplit("pid ", 1)[1].rstrip(")\n")) != first
    finally:
        console.terminate()
        console.wait(30)
        log.close()
