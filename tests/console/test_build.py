"""The build of a service (console/build.py): the install skipped while the packaging is
unchanged, byte-compiling that catches a syntax error, the assets check, the service table's
steps, and a failed build keeping its service from being started (the supervisor, the REST API,
the CLI). Builds act on small project trees in tmp_path; no test runs pip."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.app import create_console_app
from console.build import (INSTALL_STAMP, BuildEnvironment, BuildRecords, StepReport, check_assets,
                           packaging_digest, run_build)
from console.cli import main
from console.logstore import LogStore
from console.push import PushHub
from console.supervisor import RUNNING, Supervisor, SupervisorError, SupervisorSettings, build_records_path
from gateway.config import PROJECT_ROOT, ConfigError
from gateway.services import ServiceSpec, load_services

NO_PYTHON = "/nonexistent/python"  # an install that got as far as running pip would fail on it


def project(root: Path, *, broken: bool = False) -> Path:
    """A project tree as a build sees one: packaging files and the three packages."""
    (root / "pyproject.toml").parent.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "example"\n')
    (root / "setup.cfg").write_text("[mypy]\n")
    for package in ("gateway", "plugins", "console"):
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").write_text("VALUE = 1\n")
    (root / "plugins" / "feature.py").write_text("def broken(:\n    pass\n" if broken else "def fine():\n    pass\n")
    return root


async def build(spec: ServiceSpec, environment: BuildEnvironment):
    reported: list[StepReport] = []
    output: list[bytes] = []

    async def notify(step: StepReport) -> None:
        reported.append(step)

    async def collect(data: bytes) -> None:
        output.append(data)

    report = await run_build(spec, environment, environ={"PATH": "/usr/bin:/bin"}, timeout=120,
                             notify=notify, output=collect)
    assert list(report.steps) == reported  # each step reported as it finished
    return report, b"".join(output)


async def test_the_install_runs_only_when_the_packaging_changed(tmp_path):
    root = project(tmp_path / "project")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / INSTALL_STAMP).write_text(packaging_digest(root) + "\n")
    spec = ServiceSpec("alpha", "Alpha", 1, build=("install",))
    environment = BuildEnvironment(root=root, python=NO_PYTHON, venv=venv)

    report, _ = await build(spec, environment)
    assert report.ok and report.error is None
    step = report.steps[0]
    assert (step.step, step.ok, step.skipped) == ("install", True, True)
    assert "up to date" in step.detail and "pyproject.toml, setup.cfg" in step.detail

    # A dependency added: the install runs (here it cannot start, which fails the build).
    (root / "pyproject.toml").write_text('[project]\nname = "example"\ndependencies = ["one-more"]\n')
    report, _ = await build(spec, environment)
    assert not report.ok and report.steps[0].step == "install" and not report.steps[0].skipped
    assert f"cannot run `{NO_PYTHON} -m pip install" in report.steps[0].detail
    assert report.error.startswith("build of alpha failed at install: ")
    assert (venv / INSTALL_STAMP).read_text().strip() != packaging_digest(root)  # kept until an install succeeds

    outside = BuildEnvironment(root=root, python=NO_PYTHON, venv=None)
    report, _ = await build(spec, outside)
    assert report.ok and report.steps[0].skipped and "not in a virtual environment" in report.steps[0].detail


def test_the_install_digest_is_the_one_bin_console_sh_writes():
    written = subprocess.run("cat pyproject.toml setup.cfg | sha256sum | cut -d' ' -f1", shell=True, cwd=PROJECT_ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
    assert packaging_digest(PROJECT_ROOT) == written
    assert ".venv/.installed-console" in (PROJECT_ROOT / "bin" / "console.sh").read_text()


async def test_compile_fails_on_a_syntax_error_and_stops_the_build(tmp_path):
    spec = ServiceSpec("alpha", "Alpha", 1, build=("compile", "assets"), assets=("plugins/feature.py",))
    good = project(tmp_path / "good")
    report, _ = await build(spec, BuildEnvironment(root=good, python=sys.executable, venv=None))
    assert report.ok, report
    assert [step.line() for step in report.steps] == [
        "compile: ok: byte-compiled gateway/, plugins/, console/", "assets: ok: present: plugins/feature.py"]
    assert list((good / "plugins" / "__pycache__").glob("feature.*.pyc"))

    bad = project(tmp_path / "bad", broken=True)
    report, output = await build(spec, BuildEnvironment(root=bad, python=sys.executable, venv=None))
    assert not report.ok and [step.step for step in report.steps] == ["compile"]  # the assets step never ran
    assert "feature.py" in report.steps[0].detail and "SyntaxError" in report.steps[0].detail
    assert b"SyntaxError" in output  # the whole output goes to the service's log


def test_the_assets_check_names_what_is_missing(tmp_path):
    (tmp_path / "static" / "js").mkdir(parents=True)
    (tmp_path / "static" / "index.html").write_text("<!doctype html>")
    (tmp_path / "static" / "js" / "main.js").write_text("")
    (tmp_path / "empty").mkdir()
    assert check_assets(tmp_path, ["static/index.html", "static/js"]).detail == \
        "present: static/index.html, static/js (1 files)"
    missing = check_assets(tmp_path, ["static/index.html", "static/app.css", "empty"])
    assert not missing.ok and missing.detail.startswith("missing: static/app.css, empty (empty)")


def test_the_real_service_table_builds_every_service_and_its_assets_are_there():
    for spec in load_services(PROJECT_ROOT / "conf" / "services.toml"):
        assert spec.build[:2] == ("install", "compile"), spec.id
        report = check_assets(PROJECT_ROOT, spec.assets)
        assert report.ok, (spec.id, report.detail)
    frontend = next(spec for spec in load_services(PROJECT_ROOT / "conf" / "services.toml") if spec.id == "frontend")
    assert "assets" in frontend.build and "plugins/frontend/static/index.html" in frontend.assets


def test_the_service_table_refuses_an_unknown_build_step(tmp_path):
    table = tmp_path / "services.toml"
    table.write_text('[[service]]\nid = "alpha"\nport = 1\nbuild = ["install", ["make", "all"]]\n')
    assert load_services(table)[0].build == ("install", ("make", "all"))
    table.write_text('[[service]]\nid = "alpha"\nport = 1\nbuild = ["make", "all"]\n')
    with pytest.raises(ConfigError, match="service 'alpha': unknown build step 'make'.*a command is a list"):
        load_services(table)
    table.write_text('[[service]]\nid = "alpha"\nport = 1\nassets = "static"\n')
    with pytest.raises(ConfigError, match="`assets` must be a list"):
        load_services(table)


@pytest.mark.slow
async def test_a_failed_build_keeps_the_service_running_and_refuses_to_restart_it(service_table, tmp_path):
    root = project(tmp_path / "project", broken=True)
    specs = service_table([{"id": "alpha", "name": "Alpha", "build": ["compile"]}])
    data_dir = tmp_path / "data"
    environment = BuildEnvironment(root=root, python=sys.executable, venv=None)

    def supervisor_on(data: Path) -> Supervisor:
        return Supervisor(specs, data, LogStore(data / "logs"), PushHub(),
                          SupervisorSettings(health_timeout=30, stop_timeout=5), build_environment=environment)

    supervisor = supervisor_on(data_dir)
    await supervisor.open()
    try:
        pid = (await supervisor.start("alpha"))["pid"]
        with pytest.raises(SupervisorError) as failure:
            await supervisor.build("alpha")
        assert failure.value.error_type == "build_failed" and failure.value.status is None
        record = supervisor.status("alpha")
        assert record["status"] == RUNNING and record["pid"] == pid  # left as it was
        assert record["build"]["ok"] is False and record["build"]["steps"][0]["step"] == "compile"
        assert "SyntaxError" in record["lastError"]
        log = "\n".join((await supervisor.logs.get("alpha").tail(100)).lines)
        assert "[console] build compile: FAILED: " in log

        for action in (supervisor.restart, supervisor.start):
            with pytest.raises(SupervisorError) as refused:
                await action("alpha")
            assert refused.value.error_type == "build_failed" and refused.value.status == 409
            assert "alpha is not started: its last build" in str(refused.value)
            assert "console.sh build alpha" in str(refused.value)
        assert supervisor.status("alpha")["pid"] == pid
        await supervisor.stop("alpha")  # a stop is always allowed
    finally:
        await supervisor.close()

    # Kept across the console's restart; a successful build clears it and starts the service.
    again = supervisor_on(data_dir)
    await again.open()
    try:
        assert again.status("alpha")["build"]["ok"] is False
        with pytest.raises(SupervisorError):
            await again.start("alpha")
        (root / "plugins" / "feature.py").write_text("def fixed():\n    pass\n")
        record = await again.build("alpha")
        assert record["status"] == RUNNING and record["build"]["ok"] is True
        assert BuildRecords(build_records_path(data_dir)).load()["alpha"].ok
        assert (await again.restart("alpha"))["status"] == RUNNING
    finally:
        await again.close()


async def test_the_build_endpoint_reports_its_steps_and_a_failed_one_refuses_a_restart(
        aiohttp_client, service_table, make_config, tmp_path):
    """A missing asset, in a layout named by GATEWAY_CONF_DIR: the build fails, nothing is
    started, and starting it is refused until a build succeeds."""
    asset = tmp_path / "static" / "index.html"
    specs = service_table([{"id": "alpha", "name": "Alpha", "build": ["assets", [sys.executable, "-c", "print(1)"]],
                            "assets": [str(asset)]}])
    client = await aiohttp_client(create_console_app(make_config({"console.stop_timeout": 5}), specs=specs))

    response = await client.post("/api/services/alpha/build")
    body = await response.json()
    assert response.status == 502 and body["errorType"] == "build_failed", body
    assert body["service"] == "alpha" and f"missing: {asset}" in body["error"]
    record = body["services"][0]
    assert record["status"] == "failed" and record["pid"] is None
    assert record["build"]["ok"] is False and [step["step"] for step in record["build"]["steps"]] == ["assets"]
    assert (await (await client.get("/api/services/alpha")).json())["build"] == record["build"]

    for action in ("start", "restart"):
        response = await client.post(f"/api/services/alpha/{action}")
        body = await response.json()
        assert response.status == 409 and body["errorType"] == "build_failed", body
        assert "its last build" in body["error"] and body["hint"]
    response = await client.post("/api/services/start-all")
    assert response.status == 409 and (await response.json())["service"] == "alpha"


def test_the_cli_build_without_a_console_reports_each_step_and_records_a_failure(service_table, tmp_path,
                                                                                 monkeypatch):
    for name in ("ADMIN_PASSWORD", "CONSOLE_TOKEN", "CONSOLE_PORT"):
        monkeypatch.delenv(name, raising=False)
    asset = tmp_path / "static" / "app.css"
    service_table([{"id": "alpha", "name": "Alpha", "build": [[sys.executable, "-c", "print('made alpha')"]]},
                   {"id": "beta", "name": "Beta", "build": ["assets"], "assets": [str(asset)]}])
    runner = CliRunner()

    result = runner.invoke(main, ["build"])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("console: assets: ok: present: templates (") and "console/static (" in lines[0]
    assert "made alpha" in lines and f"alpha: command: ok: `{sys.executable} -c print('made alpha')` finished" in lines
    assert "alpha: built" in lines
    assert f"beta: assets: FAILED: missing: {asset}" in result.output
    assert "beta is not started until a build succeeds" in result.output
    records = BuildRecords(build_records_path(tmp_path / "data")).load()
    assert records["alpha"].ok and not records["beta"].ok

    asset.parent.mkdir()
    asset.write_text("body {}")
    result = runner.invoke(main, ["build", "beta"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"beta: assets: ok: present: {asset}", "beta: built"]
    assert BuildRecords(build_records_path(tmp_path / "data")).load()["beta"].ok
