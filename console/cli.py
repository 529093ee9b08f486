"""`console` (and bin/console.sh): start the console in the background and drive it.

The running console is found through DATA_DIR/console/console.json (its pid, host and port);
its own output goes to DATA_DIR/console/console.log. Commands that change services talk to the
console's REST API, so the console stays the one owner of the child processes."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import click
import psutil

from gateway.config import PROJECT_ROOT, Config, ConfigError
from gateway.services import ServiceSpec, load_services

from . import containers
from .app import console_credential, is_loopback, resolve_port, run_console
from .build import CONSOLE_ASSETS, BuildEnvironment, BuildRecords, StepReport, check_assets, run_build
from .logstore import LogStore
from .supervisor import SupervisorSettings, build_records_path, find_orphans, terminate_orphans

CONSOLE_START_TIMEOUT = 30.0


# ------------------------------------------------------------------ the running console

class ConsoleHandle:
    """Where the background console is and how to call it."""

    def __init__(self, config: Config, port: int | None = None):
        self.config = config
        self.directory = config.data_dir / "console"
        self.state_file = self.directory / "console.json"
        self.log_file = self.directory / "console.log"
        recorded = self.recorded() if self.pid() else {}  # a stale record says nothing
        self.host = recorded.get("host") or config.get("console.host") or "127.0.0.1"
        self.port = port or recorded.get("port") or resolve_port(config, None)

    def recorded(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
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


def _load_config(generate_secrets: bool = False) -> Config:
    """Only `start` generates the secrets (and shows a new administrator password); the other
    commands must not print one in the middle of their output."""
    try:
        return Config.load(generate_secrets=generate_secrets)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


def _specs() -> list[ServiceSpec]:
    try:
        return load_services()
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


def _format_uptime(seconds: float) -> str:
    seconds = int(seconds or 0)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def _print_services(services: list[dict]) -> None:
    click.echo(f"{'service':<20} {'state':<10} {'pid':>8} {'uptime':>10}  port")
    for row in services:
        click.echo(f"{row['id']:<20} {row['status']:<10} {row.get('pid') or '-':>8} "
                   f"{_format_uptime(row.get('uptime')) if row.get('pid') else '-':>10}  {row['port']}"
                   + (f"  ({row['lastError']})" if row.get("status") == "failed" and row.get("lastError")
                      else ""))


def _print_build(service_id: str, record: dict | None) -> None:
    """Each step of a service's last build, as the console reported it."""
    for step in (record or {}).get("steps", ()):
        click.echo(f"{service_id}: " + StepReport(step["step"], step["ok"], step["detail"], step["skipped"]).line())


def _check_console_assets() -> None:
    """The console's own pages need these; `build` and `start --build` check them first."""
    report = check_assets(PROJECT_ROOT, CONSOLE_ASSETS)
    click.echo("console: " + report.line())
    if not report.ok:
        raise click.ClickException(f"the console's own files are incomplete: {report.detail}")


def _build_through_console(handle: "ConsoleHandle", service_id: str) -> dict:
    """POST /api/services/:id/build, printing each step; the service's record once it runs again."""
    status_code, body = handle.request("POST", f"/api/services/{service_id}/build", timeout=None)
    if status_code != 200:
        failed = next((row for row in body.get("services", ()) if row.get("id") == body.get("service")), None)
        if failed is not None and body.get("errorType") == "build_failed":
            _print_build(failed["id"], failed.get("build"))
        _fail_with(body)
    _print_build(service_id, body.get("build"))
    click.echo(f"{service_id}: built and {body['status']}")
    return body


def _fail_with(body: dict) -> None:
    if body.get("services"):
        _print_services(body["services"])
    message = body.get("error", "the console refused the request")
    if body.get("hint"):
        message += f" ({body['hint']})"
    raise click.ClickException(message)


def _spawn_console(handle: ConsoleHandle) -> int:
    handle.directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "console", "serve", "--host", handle.host, "--port", str(handle.port)]
    options: dict = {}
    if os.name == "posix":
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


port_option = click.option("--port", "-p", type=int, default=None,
                           help="Console port (default: CONSOLE_PORT, then 9090).")


# ------------------------------------------------------------------ commands

@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--port", "-p", type=int, default=None,
              help="Console port, when no command is given (that is: start).")
@click.pass_context
def main(ctx: click.Context, port: int | None) -> None:
    """The operator console: supervises the eight services. Without a command: start."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(start, port=port)


@main.command()
@port_option
@click.option("--fresh", is_flag=True, help="Stop every service first (also ones a previous console left), "
                                            "then start all in order.")
@click.option("--build", is_flag=True, help="Build every service, then start it, in order.")
def start(port: int | None, fresh: bool, build: bool) -> None:
    """Start the console in the background, then all services in order; print its address."""
    config = _load_config(generate_secrets=True)  # on a first start, shows the admin password
    if build:
        _check_console_assets()
    handle = ConsoleHandle(config, port)
    if handle.running():
        click.echo(f"console already running at {handle.url} (pid {handle.pid()})")
    elif handle.pid() is not None:
        recorded = ConsoleHandle(config)
        raise click.ClickException(f"a console (pid {handle.pid()}) already runs for this DATA_DIR, at "
                                   f"{recorded.url}; it does not answer at {handle.url}. Run `stop` first.")
    else:
        pid = _spawn_console(handle)
        click.echo(f"console started at {handle.url} (pid {pid}; log {handle.log_file})")
    click.echo("starting services " + ("(fresh) " if fresh else "") + ("with a build of each " if build else "")
               + "in order...")
    if fresh or not build:
        status, body = handle.request("POST", "/api/services/start-all-fresh" if fresh else "/api/services/start-all",
                                      timeout=None)
        if status != 200:
            _fail_with(body)
    if build:  # each build restarts its service on the result, in table order; a failed one ends it
        for spec in _specs():
            _build_through_console(handle, spec.id)
    _, body = handle.request("GET", "/api/services")
    _print_services(body["services"])
    click.echo(f"console: {handle.url}")


@main.command()
@port_option
def stop(port: int | None) -> None:
    """Stop the console and every service it runs."""
    config = _load_config()
    handle = ConsoleHandle(config, port)
    specs = _specs()
    settings = SupervisorSettings.from_config(config)
    pid = handle.pid()
    if pid is None:
        click.echo("console is not running")
    else:
        os.kill(pid, signal.SIGTERM)  # the console stops its services in reverse order, then exits
        try:
            psutil.Process(pid).wait(timeout=settings.stop_timeout * (len(specs) + 1) + 10)
        except psutil.TimeoutExpired:
            click.echo(f"console (pid {pid}) did not stop in time; killing it", err=True)
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass
        click.echo(f"console stopped (pid {pid})")
    handle.state_file.unlink(missing_ok=True)
    left = terminate_orphans({spec.id for spec in specs}, config.data_dir, timeout=settings.stop_timeout)
    if left:
        click.echo(f"stopped {len(left)} service process(es) left behind: {', '.join(map(str, left))}")


@main.command()
@port_option
def status(port: int | None) -> None:
    """Each service: state, process id, uptime."""
    config = _load_config()
    handle = ConsoleHandle(config, port)
    if handle.running():
        click.echo(f"console: running at {handle.url} (pid {handle.pid()})")
        _, body = handle.request("GET", "/api/services")
        _print_services(body["services"])
        return
    click.echo("console: not running")
    specs = _specs()
    orphans = {}
    for process in find_orphans({spec.id for spec in specs}, config.data_dir):
        orphans[process.info["cmdline"][-1]] = process
    _print_services([{"id": spec.id, "port": spec.port,
                      "status": "orphaned" if spec.id in orphans else "stopped",
                      "pid": orphans[spec.id].pid if spec.id in orphans else None,
                      "uptime": time.time() - orphans[spec.id].create_time() if spec.id in orphans else 0}
                     for spec in specs])
    if orphans:
        click.echo("services left running by a previous console: `start --fresh` or `stop` ends them")


@main.command()
@click.argument("service_id")
@click.option("--rolling", is_flag=True,
              help="Replace its processes one at a time, each new one serving before the old one drains.")
@port_option
def restart(service_id: str, rolling: bool, port: int | None) -> None:
    """Restart one service through the running console (stop, then start; or --rolling)."""
    config = _load_config()
    if service_id not in {spec.id for spec in _specs()}:
        raise click.ClickException(f"unknown service {service_id!r}; known: "
                                   + ", ".join(spec.id for spec in _specs()))
    handle = ConsoleHandle(config, port)
    if not handle.running():
        raise click.ClickException("the console is not running: start it first (console.sh start)")
    action = "rolling-restart" if rolling else "restart"
    status_code, body = handle.request("POST", f"/api/services/{service_id}/{action}", timeout=None)
    if status_code != 200:
        _fail_with(body)
    click.echo(f"{service_id}: {'rolling restart done' if rolling else 'restarted'}, {body['status']} "
               f"(pid {body.get('pid')})")


@main.command()
@click.argument("service_id")
@click.argument("lines", type=click.IntRange(1, 100000), default=200)
@click.option("--offset", type=click.IntRange(0), default=0,
              help="Skip this many newest lines (paging back).")
def logs(service_id: str, lines: int, offset: int) -> None:
    """Show the last LINES lines (default 200) of a service's log."""
    config = _load_config()
    if service_id not in {spec.id for spec in _specs()}:
        raise click.ClickException(f"unknown service {service_id!r}; known: "
                                   + ", ".join(spec.id for spec in _specs()))
    section = config.section("console")
    store = LogStore(config.data_dir / "logs", int(section.get("log_max_bytes") or 5 * 1024 * 1024),
                     int(section.get("log_backups", 3)))
    for line in store.get(service_id).tail_blocking(lines, offset).lines:
        click.echo(line)


@main.command()
@click.argument("service_id", required=False)
@port_option
def build(service_id: str | None, port: int | None) -> None:
    """Build one service, or all when omitted, reporting each step. With the console running,
    each is restarted on the result; without it, only the build steps run. A failed build keeps
    its service from being started until a build succeeds."""
    config = _load_config()
    specs = _specs()
    if service_id is not None:
        specs = [spec for spec in specs if spec.id == service_id]
        if not specs:
            raise click.ClickException(f"unknown service {service_id!r}")
    else:
        _check_console_assets()
    handle = ConsoleHandle(config, port)
    if handle.running():
        for spec in specs:
            _build_through_console(handle, spec.id)
        return
    records = BuildRecords(build_records_path(config.data_dir))
    timeout = SupervisorSettings.from_config(config).build_timeout
    for spec in specs:
        if not spec.build:
            click.echo(f"{spec.id}: no build step (runs from source)")
            continue
        report = asyncio.run(_build_here(spec, timeout))
        records.save(report)
        if not report.ok:
            raise click.ClickException(f"{report.error}; {spec.id} is not started until a build succeeds")
        click.echo(f"{spec.id}: built")


async def _build_here(spec: ServiceSpec, timeout: float):
    """A build without the console: each step printed as it finishes, commands' output passed on."""
    async def notify(step: StepReport) -> None:
        click.echo(f"{spec.id}: {step.line()}")

    async def output(data: bytes) -> None:
        if data:
            click.echo(data.decode("utf-8", "replace").rstrip("\n"))

    return await run_build(spec, BuildEnvironment(), environ=dict(os.environ), timeout=timeout,
                           notify=notify, output=output)


def _docker(action) -> containers.CommandResult:
    try:
        return action()
    except containers.DockerUnavailable as error:
        raise click.ClickException(str(error)) from None


def _compose(action, verb: str) -> None:
    result = _docker(action)
    click.echo(result.output)
    if result.code != 0:
        raise click.ClickException(f"docker compose {verb} failed with exit code {result.code}")


@main.command("db:start")
def db_start() -> None:
    """Start the database containers (conf/docker-compose.yml)."""
    _compose(containers.stack_up, "up")


@main.command("db:stop")
def db_stop() -> None:
    """Stop the database containers."""
    _compose(containers.stack_down, "down")


@main.command("db:status")
def db_status() -> None:
    """Which database ports answer, the embedded PostgreSQL, and the containers."""
    from gateway.embedded_database import embedded_status

    config = _load_config()
    for check in containers.port_checks(config):
        state = "open" if check["open"] else "closed"
        click.echo(f"{check['name']:<11} {check['host']}:{check['port']:<5} {state}")
    embedded = embedded_status(config.data_dir)
    click.echo(f"embedded PostgreSQL ({embedded['pgdata']}): "
               + (f"running (pid {embedded['pid']})" if embedded["running"] else "not running"))
    result = _docker(containers.stack_status)
    click.echo(result.output)
    if result.code != 0:
        raise click.ClickException(f"docker compose ps failed with exit code {result.code}")


def _gateway_command(config: Config, arguments: list[str]) -> None:
    """`gateway ARGUMENTS` in the console's environment (DATA_DIR made absolute), its output passed on."""
    environ = {**os.environ, "DATA_DIR": str(config.data_dir)}
    code = subprocess.call([sys.executable, "-m", "gateway", *arguments], cwd=str(PROJECT_ROOT), env=environ)
    if code != 0:
        raise click.ClickException(f"gateway {arguments[0]} failed (exit code {code})")


@main.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--passphrase-file", default=None, metavar="PATH",
              help="Encrypt with the passphrase on this file's first line (default: [backup] passphrase_file, "
                   "then BACKUP_PASSPHRASE).")
@port_option
def backup(file: str | None, passphrase_file: str | None, port: int | None) -> None:
    """Back up everything (database, blobs, secrets, configuration) into FILE, while the services
    run. Without FILE: through the running console into its backup folder (kept as [backup]
    keep says), or, with no console, a new archive in that folder."""
    from .backups import BackupSettings

    config = _load_config()
    try:
        settings = BackupSettings(config)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    passphrase_file = passphrase_file or settings.passphrase_file or None
    handle = ConsoleHandle(config, port)
    if file is None and passphrase_file == (settings.passphrase_file or None) and handle.running():
        status_code, body = handle.request("POST", "/api/backups", timeout=None)
        if status_code != 200:
            if (body.get("backup") or {}).get("error"):
                click.echo(body["backup"]["error"], err=True)
            _fail_with(body)
        click.echo(f"{settings.directory / body['file']} ({body['size']} bytes)")
        return
    from gateway.backup import archive_name

    target = Path(file) if file else settings.directory / archive_name(encrypted=bool(passphrase_file or
                                                                                     os.environ.get("BACKUP_PASSPHRASE")))
    _gateway_command(config, ["backup", str(target.expanduser().resolve()),
                              *(["--passphrase-file", passphrase_file] if passphrase_file else [])])


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--force", is_flag=True, help="Replace what the data directory, database and blob storage hold.")
@click.option("--passphrase-file", default=None, metavar="PATH",
              help="The passphrase of an encrypted archive (default: [backup] passphrase_file, then "
                   "BACKUP_PASSPHRASE).")
@port_option
def restore(file: str, force: bool, passphrase_file: str | None, port: int | None) -> None:
    """Restore FILE into DATA_DIR, the database and the blob storage (empty ones, unless --force).
    The console must be stopped (`stop`); `start` afterwards, and the vectors are indexed again."""
    from .backups import BackupSettings

    config = _load_config()
    handle = ConsoleHandle(config, port)
    if handle.pid() is not None:
        raise click.ClickException("the console is running: `stop` it (and its services) before a restore")
    try:
        passphrase_file = passphrase_file or BackupSettings(config).passphrase_file or None
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    _gateway_command(config, ["restore", str(Path(file).resolve()), *(["--force"] if force else []),
                              *(["--passphrase-file", passphrase_file] if passphrase_file else [])])
    click.echo("restored; start the console and its services with `start`")


@main.command("help")
@click.pass_context
def help_command(ctx: click.Context) -> None:
    """Show this help."""
    click.echo(ctx.parent.get_help())


@main.command()
@click.option("--host", default=None,
              help="Address to bind (default 127.0.0.1; any other requires a credential).")
@port_option
def serve(host: str | None, port: int | None) -> None:
    """Run the console in the foreground (what `start` runs in the background)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    config = _load_config(generate_secrets=True)
    try:
        run_console(config, host, port)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:  # the port is taken, most often
        raise click.ClickException(f"the console cannot listen: {error}") from None


if __name__ == "__main__":  # pragma: no cover
    main()
