"""`console` (and bin/console.sh): start the console in the background and drive it.

The running console is found through DATA_DIR/console/console.json (its pid, host and port);
its own output goes to DATA_DIR/console/console.log. Commands that change services talk to the
console's REST API, so the console stays the one owner of the child processes. The running
console's handle is in `console.handle`; the data commands (db:*, backup, restore) in
`console.cli_data`."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time

import click
import psutil

from gateway.config import ConfigError
from gateway.services import ServiceSpec

from . import cli_data
from .app import run_console
from .build import BuildEnvironment, BuildRecords, BuildReport, StepReport, run_build
from .cli_common import (build_through_console, check_console_assets, fail_with, load_config, load_specs,
                         port_option, print_services)
from .handle import ConsoleHandle, spawn_console
from .logstore import LogStore
from .supervisor import SupervisorSettings, build_records_path, find_orphans, terminate_orphans


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
    config = load_config(generate_secrets=True)  # on a first start, shows the admin password
    if build:
        check_console_assets()
    handle = ConsoleHandle(config, port)
    if handle.running():
        click.echo(f"console already running at {handle.url} (pid {handle.pid()})")
    elif handle.pid() is not None:
        recorded = ConsoleHandle(config)
        raise click.ClickException(f"a console (pid {handle.pid()}) already runs for this DATA_DIR, at "
                                   f"{recorded.url}; it does not answer at {handle.url}. Run `stop` first.")
    else:
        pid = spawn_console(handle)
        click.echo(f"console started at {handle.url} (pid {pid}; log {handle.log_file})")
    click.echo("starting services " + ("(fresh) " if fresh else "") + ("with a build of each " if build else "")
               + "in order...")
    if fresh or not build:
        status, body = handle.request("POST", "/api/services/start-all-fresh" if fresh else "/api/services/start-all",
                                      timeout=None)
        if status != 200:
            fail_with(body)
    if build:  # each build restarts its service on the result, in table order; a failed one ends it
        for spec in load_specs():
            build_through_console(handle, spec.id)
    _, body = handle.request("GET", "/api/services")
    print_services(body["services"])
    click.echo(f"console: {handle.url}")


@main.command()
@port_option
def stop(port: int | None) -> None:
    """Stop the console and every service it runs."""
    config = load_config()
    handle = ConsoleHandle(config, port)
    specs = load_specs()
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
    config = load_config()
    handle = ConsoleHandle(config, port)
    if handle.running():
        click.echo(f"console: running at {handle.url} (pid {handle.pid()})")
        _, body = handle.request("GET", "/api/services")
        print_services(body["services"])
        return
    click.echo("console: not running")
    specs = load_specs()
    orphans = {}
    for process in find_orphans({spec.id for spec in specs}, config.data_dir):
        orphans[process.info["cmdline"][-1]] = process
    print_services([{"id": spec.id, "port": spec.port,
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
    config = load_config()
    if service_id not in {spec.id for spec in load_specs()}:
        raise click.ClickException(f"unknown service {service_id!r}; known: "
                                   + ", ".join(spec.id for spec in load_specs()))
    handle = ConsoleHandle(config, port)
    if not handle.running():
        raise click.ClickException("the console is not running: start it first (console.sh start)")
    action = "rolling-restart" if rolling else "restart"
    status_code, body = handle.request("POST", f"/api/services/{service_id}/{action}", timeout=None)
    if status_code != 200:
        fail_with(body)
    click.echo(f"{service_id}: {'rolling restart done' if rolling else 'restarted'}, {body['status']} "
               f"(pid {body.get('pid')})")


@main.command()
@click.argument("service_id")
@click.argument("lines", type=click.IntRange(1, 100000), default=200)
@click.option("--offset", type=click.IntRange(0), default=0,
              help="Skip this many newest lines (paging back).")
def logs(service_id: str, lines: int, offset: int) -> None:
    """Show the last LINES lines (default 200) of a service's log."""
    config = load_config()
    if service_id not in {spec.id for spec in load_specs()}:
        raise click.ClickException(f"unknown service {service_id!r}; known: "
                                   + ", ".join(spec.id for spec in load_specs()))
    console = config.settings.console
    store = LogStore(config.data_dir / "logs", console.log_max_bytes, console.log_backups)
    for line in store.get(service_id).tail_blocking(lines, offset).lines:
        click.echo(line)


@main.command()
@click.argument("service_id", required=False)
@port_option
def build(service_id: str | None, port: int | None) -> None:
    """Build one service, or all when omitted, reporting each step. With the console running,
    each is restarted on the result; without it, only the build steps run. A failed build keeps
    its service from being started until a build succeeds."""
    config = load_config()
    specs = load_specs()
    if service_id is not None:
        specs = [spec for spec in specs if spec.id == service_id]
        if not specs:
            raise click.ClickException(f"unknown service {service_id!r}")
    else:
        check_console_assets()
    handle = ConsoleHandle(config, port)
    if handle.running():
        for spec in specs:
            build_through_console(handle, spec.id)
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


async def _build_here(spec: ServiceSpec, timeout: float) -> BuildReport:
    """A build without the console: each step printed as it finishes, commands' output passed on."""
    async def notify(step: StepReport) -> None:
        click.echo(f"{spec.id}: {step.line()}")

    async def output(data: bytes) -> None:
        if data:
            click.echo(data.decode("utf-8", "replace").rstrip("\n"))

    return await run_build(spec, BuildEnvironment(), environ=dict(os.environ), timeout=timeout,
                           notify=notify, output=output)


@main.command("help")
@click.pass_context
def help_command(ctx: click.Context) -> None:
    """Show this help."""
    assert ctx.parent is not None  # a command of the `main` group
    click.echo(ctx.parent.get_help())


@main.command()
@click.option("--host", default=None,
              help="Address to bind (default 127.0.0.1; any other requires a credential).")
@port_option
def serve(host: str | None, port: int | None) -> None:
    """Run the console in the foreground (what `start` runs in the background)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    config = load_config(generate_secrets=True)
    try:
        run_console(config, host, port)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:  # the port is taken, most often
        raise click.ClickException(f"the console cannot listen: {error}") from None


for command in (cli_data.db_start, cli_data.db_stop, cli_data.db_status, cli_data.backup, cli_data.restore):
    main.add_command(command)


if __name__ == "__main__":  # pragma: no cover
    main()
