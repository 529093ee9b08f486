"""The `gateway` command line: serve one service, apply migrations, list plugins. Plugins add
their own commands through `Plugin.cli()`.

What a command needs is imported in it: the parent of several workers runs no plugin and opens
no database, and stays without their modules (gateway/__init__.py)."""
from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from .config import Config, ConfigError


def _configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


class GatewayGroup(click.Group):
    """Adds the commands that installed plugins offer, without failing when one cannot load."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugin_commands()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, name) or self._plugin_commands().get(name)

    def _plugin_commands(self) -> dict:
        from .plugins import PluginError, installed_plugins

        commands: dict[str, click.Command] = {}
        try:
            plugins = installed_plugins()
        except PluginError:
            return commands
        for plugin in plugins.values():
            for command in plugin.cli():
                commands.setdefault(command.name or "", command)
        return commands


@click.group(cls=GatewayGroup)
@click.option("--log-level", default="info", show_default=True, help="debug, info, warning or error")
@click.pass_context
def main(context: click.Context, log_level: str) -> None:
    """The assistant's services."""
    _configure_logging(log_level)
    context.obj = {"log_level": log_level}


@main.command()
@click.option("--service", "service_id", required=True, help="Service id from conf/services.toml.")
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default: the service table's).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes serving the port (default: the service table's `workers`; the gateway's is "
                   "one per two cores, at least 1, at most 8; 1 for services that keep state in their process).")
# A worker of `--workers N` (gateway.workers): its index, the bus and vector store its parent holds
# (and whether the parent is taking that store over from the process it replaces).
@click.option("--worker-index", type=int, default=None, hidden=True)
@click.option("--bus-url", default=None, hidden=True)
@click.option("--vectors-socket", default=None, hidden=True)
@click.option("--take-over-vectors", is_flag=True, hidden=True)
@click.option("--reuse-port", is_flag=True,
              help="Bind with SO_REUSEPORT, so that a replacement can serve the port beside this process "
                   "(a rolling restart of one process; workers always do).")
@click.option("--ready-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write this file once the port is served (what a rolling restart waits for).")
@click.pass_context
def serve(context: click.Context, service_id: str, host: str | None, port: int | None, workers: int | None,
          worker_index: int | None, bus_url: str | None, vectors_socket: str | None, take_over_vectors: bool,
          reuse_port: bool, ready_file: Path | None) -> None:
    """Run one service in the foreground; SIGTERM drains and stops it (every worker)."""
    from .services import get_service
    from .embedded_bus import redis_server_binary
    from .worker_count import worker_count
    from .workers import run_workers

    try:
        if worker_index is not None:
            overrides = {key: value for key, value in (("bus.redis_url", bus_url),
                                                       ("vectors.shared_socket", vectors_socket),
                                                       ("vectors.take_over", take_over_vectors)) if value}
            _serve_here(service_id, host, port, Config.load(overrides=overrides), worker_index=worker_index,
                        ready_file=ready_file)
            return
        spec = get_service(service_id)
        # A rolling restart's replacement (it is given a ready file) takes the embedded vector
        # store over from the process it replaces rather than refusing it (gateway/edge_engine.py).
        config = Config.load(overrides={"vectors.take_over": True} if ready_file is not None else None)
        bus_at_hand = bool(config.settings.bus.redis_url) or redis_server_binary() is not None
        count = worker_count(spec, workers, bus_at_hand=bus_at_hand)
        if count == 1:
            _serve_here(service_id, host, port, config, reuse_port=reuse_port, ready_file=ready_file)
        else:  # the parent: it builds no service (gateway/workers.py)
            run_workers(service_id, host or "127.0.0.1", port or spec.port, count, config,
                        log_level=(context.obj or {}).get("log_level", "info"), ready_file=ready_file)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


def _serve_here(service_id: str, host: str | None, port: int | None, config: Config, **options: Any) -> None:
    """The service in this process (`gateway.serving.run`); a plugin set that cannot start or a
    database that cannot be prepared (a failed migration among them) is a message, not a traceback."""
    from .database import DatabaseError
    from .plugins import PluginError
    from .serving import run

    try:
        run(service_id, host, port, config, **options)
    except (ConfigError, PluginError, DatabaseError) as error:
        raise click.ClickException(str(error)) from None


@main.command()
@click.option("--service", "service_id", default=None, help="Only this service's plugins (default: all).")
def migrate(service_id: str | None) -> None:
    """Apply every pending migration of the installed plugins."""
    from .app import create_app
    from .database import DatabaseError
    from .plugins import REGISTRY, PluginError
    from .services import load_services

    async def go() -> list[str]:
        from .database import create_pool, resolve_database_url
        from .migrations import apply_migrations, migration_files

        config = Config.load()
        specs = [s for s in load_services(data_dir=config.data_dir) if service_id in (None, s.id)]
        if not specs:
            raise click.ClickException(f"unknown service {service_id!r}")
        plans, seen = [], set()
        for spec in specs:
            registry = create_app(spec.id, config, spec=spec)[REGISTRY]
            for m in registry.migrations:
                if m.plugin not in seen:
                    seen.add(m.plugin)
                    plans.append((m.plugin, migration_files(m.package, m.directory)))
        url, _ = await resolve_database_url(config)
        pool = await create_pool(url)
        try:
            return await apply_migrations(pool, plans)
        finally:
            pool.close()
            await pool.wait_closed()

    try:
        applied = asyncio.run(go())
    except (ConfigError, PluginError, DatabaseError) as error:
        raise click.ClickException(str(error)) from None
    click.echo("\n".join(f"applied {name}" for name in applied) or "nothing to apply: up to date")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--reference", is_flag=True,
              help="Print the Markdown reference of every plugin's settings (docs/configuration.md).")
@click.option("--distribution", default=None, metavar="NAME",
              help="Only the plugins this installed distribution publishes, e.g. assistant-gateway.")
def plugins(as_json: bool, reference: bool, distribution: str | None) -> None:
    """Each installed plugin: version, services, settings, routes, WebSocket types, jobs."""
    from .context import Context
    from .inventory import error_summary, installed_plugin_list
    from .plugins import PluginRecord, Registrar, Registry
    from .services import load_services
    from .settings_reference import describe_settings, markdown_reference, toml_value

    config = Config.load(generate_secrets=False)
    try:
        installed = installed_plugin_list(config, load_services(data_dir=config.data_dir), distribution)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    if reference:
        broken = [row for row in installed if row.plugin is None]
        if broken:
            failure = broken[0].error or {}
            raise click.ClickException(f"plugin {broken[0].name!r} failed to import: "
                                       f"{failure.get('type')}: {failure.get('message')}")
        click.echo(markdown_reference([row.plugin for row in installed if row.plugin is not None]), nl=False)
        return
    rows: list[dict] = []
    for entry in installed:
        # `setup_error`: what a trial setup outside a service raised (a contract it needs, say).
        row: dict = {**entry.summary(), "settings": [], "routes": [], "ws_types": [], "jobs": [], "provides": [],
                     "migrations": False, "setup_error": None}
        rows.append(row)
        if entry.plugin is None:
            continue
        plugin = entry.plugin
        try:
            row["settings"] = [vars(setting) for setting in describe_settings(plugin)]
            registry = Registry()
            registry.records[plugin.name] = record = PluginRecord(plugin)
            plugin.setup(Registrar(registry, plugin, Context("inspect", config)))
        except Exception as exc:  # listing must show a broken plugin, not stop at it
            row["setup_error"] = error_summary(exc)
            continue
        row.update(routes=[f"{method} {path}" for method, path, _ in record.routes], ws_types=record.ws_types,
                   jobs=record.jobs, provides=record.provides, migrations=record.has_migrations)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no plugins installed")
    for row in rows:
        click.echo(f"{row['name']} {row['version']}" + ("" if row["enabled"] else " (disabled)")
                   + (f"  depends: {', '.join(row['depends'])}" if row["depends"] else "")
                   + f"  services: {', '.join(row['services']) or 'none'}")
        for setting in row["settings"]:
            click.echo(f"    setting plugins.{row['name']}.{setting['key']} ({setting['type']}) = "
                       f"{toml_value(setting['default'])}  {setting['description']}")
        for route in row["routes"]:
            click.echo(f"    route   {route}")
        for ws_type in row["ws_types"]:
            click.echo(f"    ws      {ws_type}")
        for job in row["jobs"]:
            click.echo(f"    job     {job}")
        for kind in ("error", "setup_error"):
            if row[kind]:
                click.echo(f"    {kind.replace('_', ' ')}   {row[kind]['type']}: {row[kind]['message']}")


def _passphrase(passphrase_file: str | None) -> str | None:
    """From a file (its first line) or BACKUP_PASSPHRASE; never from an argument (argv is public)."""
    import os
    from pathlib import Path

    if passphrase_file:
        try:
            text = Path(passphrase_file).read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise click.ClickException(f"cannot read the passphrase file: {error}") from None
        if not text or not text[0]:
            raise click.ClickException(f"the passphrase file {passphrase_file} is empty")
        return text[0]
    return os.environ.get("BACKUP_PASSPHRASE") or None


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--passphrase-file", default=None, metavar="PATH",
              help="Encrypt with the passphrase on this file's first line (default: BACKUP_PASSPHRASE, if set).")
def backup(file: str, passphrase_file: str | None) -> None:
    """Write one archive of everything (database, blobs, secrets, configuration) to FILE, while
    the services run. The environment is read as `serve` reads it."""
    from pathlib import Path

    from .backup import BackupError, create_backup
    from .database import DatabaseError

    passphrase = _passphrase(passphrase_file)
    try:
        result = asyncio.run(create_backup(Config.load(), Path(file), passphrase,
                                           progress=lambda step: click.echo(step, err=True)))
    except (BackupError, ConfigError, DatabaseError) as error:
        raise click.ClickException(str(error)) from None
    blobs = result.manifest["blobs"]
    click.echo(json.dumps({"file": str(result.path), "size": result.size, "blobs": blobs["count"],
                           "encrypted": bool(passphrase), "created_at": result.manifest["created_at"]}))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace what the data directory, database and blob storage hold.")
@click.option("--check", is_flag=True, help="Only verify the archive (every checksum); touch nothing.")
@click.option("--passphrase-file", default=None, metavar="PATH",
              help="The passphrase of an encrypted archive, on this file's first line (default: BACKUP_PASSPHRASE).")
def restore(file: str, force: bool, check: bool, passphrase_file: str | None) -> None:
    """Restore FILE into the environment's DATA_DIR, database and blob storage (all empty, unless
    --force). Stop the services first; they index the vectors again when they start."""
    from pathlib import Path

    from .backup import BackupError, restore_backup, verify_archive
    from .database import DatabaseError

    passphrase = _passphrase(passphrase_file)
    try:
        if check:
            manifest = verify_archive(Path(file), passphrase)
            click.echo(json.dumps({"ok": True, "created_at": manifest.get("created_at"),
                                   "app_version": manifest.get("app_version"), "members": len(manifest["members"])}))
            return
        # Secrets come from the archive: none may be generated into the data directory first.
        config = Config.load(generate_secrets=False)
        result = asyncio.run(restore_backup(config, Path(file), passphrase, force=force,
                                            progress=lambda step: click.echo(step, err=True)))
    except (BackupError, ConfigError, DatabaseError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(json.dumps({"restored": str(file), "created_at": result.manifest.get("created_at"),
                           "blobs": result.blobs, "data_files": result.data_files,
                           "configuration_files": result.configuration_files}))
    if result.configuration_files:
        click.echo("The archive's configuration files are in "
                   f"{config.data_dir / 'restored-configuration'}: compare them with yours.", err=True)
