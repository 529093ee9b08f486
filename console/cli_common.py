"""What the console's commands share: the configuration and the service table read with a clear
error, the `--port` option, printing the services and their builds, and a build through the
running console."""
from __future__ import annotations

import click

from gateway.config import PROJECT_ROOT, Config, ConfigError
from gateway.services import ServiceSpec, load_services

from .build import CONSOLE_ASSETS, StepReport, check_assets
from .handle import ConsoleHandle


def load_config(generate_secrets: bool = False) -> Config:
    """Only `start` generates the secrets (and shows a new administrator password); the other
    commands must not print one in the middle of their output."""
    try:
        return Config.load(generate_secrets=generate_secrets)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


def load_specs() -> list[ServiceSpec]:
    try:
        return load_services()
    except ConfigError as error:
        raise click.ClickException(str(error)) from None


def format_uptime(seconds: float | None) -> str:
    seconds = int(seconds or 0)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def print_services(services: list[dict]) -> None:
    click.echo(f"{'service':<20} {'state':<10} {'pid':>8} {'uptime':>10}  port")
    for row in services:
        click.echo(f"{row['id']:<20} {row['status']:<10} {row.get('pid') or '-':>8} "
                   f"{format_uptime(row.get('uptime')) if row.get('pid') else '-':>10}  {row['port']}"
                   + (f"  ({row['lastError']})" if row.get("status") == "failed" and row.get("lastError")
                      else ""))


def print_build(service_id: str, record: dict | None) -> None:
    """Each step of a service's last build, as the console reported it."""
    for step in (record or {}).get("steps", ()):
        click.echo(f"{service_id}: " + StepReport(step["step"], step["ok"], step["detail"], step["skipped"]).line())


def check_console_assets() -> None:
    """The console's own pages need these; `build` and `start --build` check them first."""
    report = check_assets(PROJECT_ROOT, CONSOLE_ASSETS)
    click.echo("console: " + report.line())
    if not report.ok:
        raise click.ClickException(f"the console's own files are incomplete: {report.detail}")


def build_through_console(handle: ConsoleHandle, service_id: str) -> dict:
    """POST /api/services/:id/build, printing each step; the service's record once it runs again."""
    status_code, body = handle.request("POST", f"/api/services/{service_id}/build", timeout=None)
    if status_code != 200:
        failed = next((row for row in body.get("services", ()) if row.get("id") == body.get("service")), None)
        if failed is not None and body.get("errorType") == "build_failed":
            print_build(failed["id"], failed.get("build"))
        fail_with(body)
    print_build(service_id, body.get("build"))
    click.echo(f"{service_id}: built and {body['status']}")
    return body


def fail_with(body: dict) -> None:
    if body.get("services"):
        print_services(body["services"])
    message = body.get("error", "the console refused the request")
    if body.get("hint"):
        message += f" ({body['hint']})"
    raise click.ClickException(message)


port_option = click.option("--port", "-p", type=int, default=None,
                           help="Console port (default: CONSOLE_PORT, then 9090).")

