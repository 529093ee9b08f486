"""The console's commands for the data: the database containers (`db:start`, `db:stop`,
`db:status`), `backup` and `restore`. `console.cli` adds them to its group."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typing import Callable

import click

from gateway.config import PROJECT_ROOT, Config, ConfigError

from . import containers
from .cli_common import fail_with, load_config, port_option
from .handle import ConsoleHandle


def _docker(action: Callable[[], containers.CommandResult]) -> containers.CommandResult:
    try:
        return action()
    except containers.DockerUnavailable as error:
        raise click.ClickException(str(error)) from None


def _compose(action: Callable[[], containers.CommandResult], verb: str) -> None:
    result = _docker(action)
    click.echo(result.output)
    if result.code != 0:
        raise click.ClickException(f"docker compose {verb} failed with exit code {result.code}")


@click.command("db:start")
def db_start() -> None:
    """Start the database containers (conf/docker-compose.yml)."""
    _compose(containers.stack_up, "up")


@click.command("db:stop")
def db_stop() -> None:
    """Stop the database containers."""
    _compose(containers.stack_down, "down")


@click.command("db:status")
def db_status() -> None:
    """Which database ports answer, the embedded PostgreSQL, and the containers."""
    from gateway.embedded_database import embedded_status

    config = load_config()
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


@click.command()
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

    config = load_config()
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
            fail_with(body)
        click.echo(f"{settings.directory / body['file']} ({body['size']} bytes)")
        return
    from gateway.backup import archive_name

    target = Path(file) if file else settings.directory / archive_name(encrypted=bool(passphrase_file or
                                                                                     os.environ.get("BACKUP_PASSPHRASE")))
    _gateway_command(config, ["backup", str(target.expanduser().resolve()),
                              *(["--passphrase-file", passphrase_file] if passphrase_file else [])])


@click.command()
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

    config = load_config()
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
