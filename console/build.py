"""The build of a service (spec/console.md: `build` recompiles it, then it is started again).
The services run from this code base's Python sources, so "recompiling" is what a Python service
needs after an update, as each row's `build` of conf/services.toml lists it:

- `install`: `pip install -e .` into the console's virtual environment, only when
  pyproject.toml or setup.cfg changed since the last install (a digest in
  `<venv>/.installed-console`, the one bin/console.sh writes too);
- `compile`: byte-compile gateway/, plugins/ and console/ (`python -m compileall`): a syntax
  error fails the build before the service is stopped;
- `assets`: the row's `assets` (static files, templates) are there;
- a list of arguments: that command, run from the project root without a shell.

Steps run in order; the first that fails ends the build. Each step's outcome is reported as it
finishes (the console notes it in the service's log, the CLI prints it) and kept with the
service (`BuildRecords`), so that a service whose last build failed is not started on it."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Awaitable, Callable, Iterable

from gateway.config import PROJECT_ROOT
from gateway.services import ServiceSpec

INSTALL_STAMP = ".installed-console"
# What `pip install -e .` reads: a change to either is a reason to install again.
PACKAGING_FILES = ("pyproject.toml", "setup.cfg")
# The packages every service imports its code from.
COMPILED = ("gateway", "plugins", "console")
# What the console's own pages need (console/pages.py); checked by `build` and `start --build`.
CONSOLE_ASSETS = ("templates", "console/static")
# Lines of a failed command's output quoted in its step's report (all of it is in the log).
QUOTED_LINES = 6


def current_venv() -> Path | None:
    """The virtual environment the console runs in, or None outside one."""
    return Path(sys.prefix) if sys.prefix != sys.base_prefix else None


@dataclass(frozen=True)
class BuildEnvironment:
    """Where a build acts: the project's sources, the interpreter the services run on, and its
    virtual environment (where `install` installs and keeps its stamp)."""
    root: Path = PROJECT_ROOT
    python: str = sys.executable
    venv: Path | None = field(default_factory=current_venv)


@dataclass(frozen=True)
class StepReport:
    step: str  # install, compile, assets, command
    ok: bool
    detail: str
    skipped: bool = False  # nothing needed doing (the install is up to date)

    def public(self) -> dict:
        return {"step": self.step, "ok": self.ok, "skipped": self.skipped, "detail": self.detail}

    def line(self) -> str:
        outcome = "skipped" if self.skipped else ("ok" if self.ok else "FAILED")
        return f"{self.step}: {outcome}: {self.detail}"


@dataclass(frozen=True)
class BuildReport:
    service: str
    ok: bool
    at: str
    steps: tuple[StepReport, ...]
    error: str | None = None

    def public(self) -> dict:
        return {"ok": self.ok, "at": self.at, "steps": [step.public() for step in self.steps],
                "error": self.error}

    @classmethod
    def from_public(cls, service: str, data: dict) -> "BuildReport":
        steps = tuple(StepReport(str(s["step"]), bool(s["ok"]), str(s["detail"]), bool(s.get("skipped")))
                      for s in data.get("steps", ()))
        return cls(service, bool(data["ok"]), str(data["at"]), steps, data.get("error"))


Notify = Callable[[StepReport], Awaitable[None]]
Output = Callable[[bytes], Awaitable[None]]


def packaging_digest(root: Path) -> str:
    """sha256 of the packaging files, as `cat pyproject.toml setup.cfg | sha256sum` (bin/console.sh)."""
    digest = hashlib.sha256()
    for name in PACKAGING_FILES:
        path = root / name
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def check_assets(root: Path, paths: Iterable[str]) -> StepReport:
    """Each path (from `root`) exists; a folder holds at least one file. Blocking (stat calls)."""
    present: list[str] = []
    missing: list[str] = []
    for name in paths:
        path = root / name
        if path.is_dir():
            count = sum(1 for item in path.rglob("*") if item.is_file())
            (present if count else missing).append(f"{name} ({count} files)" if count else f"{name} (empty)")
        elif path.is_file():
            present.append(name)
        else:
            missing.append(name)
    if missing:
        return StepReport("assets", False, f"missing: {', '.join(missing)} (under {root}); restore them "
                                           f"(git checkout, or reinstall the project)")
    return StepReport("assets", True, f"present: {', '.join(present)}" if present else "none listed")


def _quoted(output: bytes) -> str:
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    notable = [line for line in lines if line.startswith("***") or "Error" in line] or lines
    return " | ".join(notable[:QUOTED_LINES])


async def run_command(command: list[str], cwd: Path, environ: dict[str, str], timeout: float,
                      output: Output) -> tuple[int | None, bytes]:
    """The command's exit code (None: stopped after `timeout` seconds) and its output, which is
    also handed to `output`. OSError when it cannot be started."""
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, cwd=str(cwd), env=environ)
    assert process.stdout is not None
    try:
        data = await asyncio.wait_for(process.stdout.read(), timeout)
        code: int | None = await process.wait()
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        data, code = b"", None
    await output(data)
    return code, data


class Build:
    """One service's build, step after step."""

    def __init__(self, spec: ServiceSpec, environment: BuildEnvironment, environ: dict[str, str],
                 timeout: float, output: Output):
        self.spec = spec
        self.environment = environment
        self.environ = environ
        self.timeout = timeout
        self.output = output

    async def command(self, step: str, command: list[str]) -> tuple[StepReport | None, bytes]:
        """None and the output when it exited 0; else the failed step's report."""
        shown = " ".join(command)
        try:
            code, data = await run_command(command, self.environment.root, self.environ, self.timeout, self.output)
        except OSError as error:
            return StepReport(step, False, f"cannot run `{shown}`: {error}"), b""
        if code is None:
            return StepReport(step, False, f"`{shown}` did not finish within {self.timeout:g}s "
                                           f"([console] build_timeout)"), b""
        if code != 0:
            quoted = _quoted(data)
            return StepReport(step, False, f"`{shown}` failed with exit code {code}"
                                           + (f": {quoted}" if quoted else "")), data
        return None, data

    async def install(self) -> StepReport:
        venv = self.environment.venv
        if venv is None:
            return StepReport("install", True, "the console's Python is not in a virtual environment; install the "
                                               "project's dependencies yourself (pip install -e .)", skipped=True)
        loop = asyncio.get_running_loop()
        root = self.environment.root
        digest = await loop.run_in_executor(None, packaging_digest, root)
        stamp = venv / INSTALL_STAMP
        recorded = await loop.run_in_executor(None, _read_text, stamp)
        if recorded == digest:
            return StepReport("install", True, f"up to date ({', '.join(PACKAGING_FILES)} unchanged since the last "
                                               f"install into {venv})", skipped=True)
        failed, _ = await self.command("install", [self.environment.python, "-m", "pip", "install", "--quiet",
                                                   "--disable-pip-version-check", "-e", str(root)])
        if failed is not None:
            return failed
        await loop.run_in_executor(None, _write_text, stamp, digest + "\n")
        return StepReport("install", True, f"installed the project and its dependencies into {venv} "
                                           f"({'first install' if recorded is None else 'packaging changed'})")

    async def compile(self) -> StepReport:
        root = self.environment.root
        packages = [name for name in COMPILED if (root / name).is_dir()]
        if not packages:
            return StepReport("compile", False, f"none of {', '.join(COMPILED)} is under {root}")
        failed, _ = await self.command("compile", [self.environment.python, "-m", "compileall", "-q", *packages])
        if failed is not None:
            return failed
        return StepReport("compile", True, f"byte-compiled {', '.join(name + '/' for name in packages)}")

    async def assets(self) -> StepReport:
        return await asyncio.get_running_loop().run_in_executor(
            None, check_assets, self.environment.root, self.spec.assets)

    async def step(self, item: str | tuple[str, ...]) -> StepReport:
        if isinstance(item, tuple):
            failed, _ = await self.command("command", list(item))
            return failed or StepReport("command", True, f"`{' '.join(item)}` finished")
        return await {"install": self.install, "compile": self.compile, "assets": self.assets}[item]()


async def run_build(spec: ServiceSpec, environment: BuildEnvironment, *, environ: dict[str, str], timeout: float,
                    notify: Notify, output: Output) -> BuildReport:
    """Run `spec.build` in order, `notify` after each step, until one fails."""
    build = Build(spec, environment, environ, timeout, output)
    steps: list[StepReport] = []
    error = None
    for item in spec.build:
        report = await build.step(item)
        steps.append(report)
        await notify(report)
        if not report.ok:
            error = f"build of {spec.id} failed at {report.step}: {report.detail}"
            break
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return BuildReport(spec.id, error is None, at, tuple(steps), error)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write_text(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


class BuildRecords:
    """Each service's last build, in `DATA_DIR/console/builds.json`, so that a failed build keeps
    its service from being started on it after the console (or the CLI that built it) exits.
    Blocking: the console calls it in an executor."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()  # two services built at once both land

    def load(self) -> dict[str, BuildReport]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable: as if never built, rather than a console that cannot start
        records = {}
        for service, record in data.items() if isinstance(data, dict) else ():
            try:
                records[service] = BuildReport.from_public(service, record)
            except (KeyError, TypeError, ValueError):
                continue
        return records

    def save(self, report: BuildReport) -> None:
        with self._lock:
            records = self.load()
            records[report.service] = report
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _write_text(self.path, json.dumps({service: r.public() for service, r in sorted(records.items())},
                                              indent=1) + "\n")
