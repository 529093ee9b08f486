"""Backups from the console: `POST /api/backups` (the Database panel's button), the archives in
the backup folder (list, download, delete, restore), and scheduled backups (`[backup] every`,
keeping the newest `keep`), whose state the dashboard shows.

Each backup is `gateway backup FILE` run as a child process with the services' own environment
(the same DATA_DIR, DATABASE_URL and storage settings), so the console's event loop only waits.
A restore (`gateway restore`) runs only while every service is stopped."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator

import marshmallow
from aiohttp import web
from marshmallow import fields

from gateway.backup import BackupError, archive_name, backups_in, parse_interval, prune
from gateway.config import PROJECT_ROOT, Config, ConfigError
from gateway.errors import ApiError, NotFound
from gateway.jobs import JobGroup
from gateway.openapi import api_doc
from gateway.validation import parse_body

from .supervisor import Supervisor

log = logging.getLogger("console.backups")

ARCHIVE_NAME = re.compile(r"^backup-\d{8}-\d{6}(-\d+)?\.tar\.gz(\.enc)?\Z")
OUTPUT_TAIL = 4000


class BackupSettings:
    """`[backup]`: where archives go, how often a scheduled one is taken, how many are kept."""

    def __init__(self, config: Config):
        settings = config.settings.backup
        try:
            self.every = parse_interval(settings.every)
        except BackupError as error:
            raise ConfigError(str(error)) from None
        self.keep = settings.keep
        if self.keep < 0:
            raise ConfigError(f"[backup] keep = {self.keep} must be 0 (keep all) or more")
        self.directory = (Path(settings.directory).expanduser().resolve() if settings.directory
                          else config.data_dir / "backups")
        self.passphrase_file = settings.passphrase_file


class Backups:
    """Runs one backup at a time and remembers how the last one went (DATA_DIR/console/backups.json)."""

    def __init__(self, config: Config, supervisor: Supervisor):
        self.settings = BackupSettings(config)
        self.supervisor = supervisor
        self.state_file = config.data_dir / "console" / "backups.json"
        self.running: dict[str, Any] | None = None
        self.next_at: float | None = None
        self._lock = asyncio.Lock()
        self.last: dict[str, Any] | None = self._load_state()

    def _load_state(self) -> dict[str, Any] | None:
        try:
            last: dict[str, Any] | None = json.loads(self.state_file.read_text()).get("last")
            return last
        except (OSError, ValueError, AttributeError):
            return None

    def _save_state(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps({"last": self.last}))

    def _command(self, *arguments: str) -> list[str]:
        command = [sys.executable, "-m", "gateway", *arguments]
        if self.settings.passphrase_file:
            command += ["--passphrase-file", self.settings.passphrase_file]
        return command

    async def _run(self, command: list[str]) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            *command, cwd=str(PROJECT_ROOT), env=self.supervisor.child_environment(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        output, _ = await process.communicate()
        return process.returncode or 0, output.decode("utf-8", "replace")

    def _new_path(self) -> Path:
        encrypted = bool(self.settings.passphrase_file or os.environ.get("BACKUP_PASSPHRASE"))
        path = self.settings.directory / archive_name(encrypted=encrypted)
        counter = 1
        while path.exists():  # two within one second
            counter += 1
            path = self.settings.directory / archive_name(encrypted=encrypted).replace(
                ".tar.gz", f"-{counter}.tar.gz", 1)
        return path

    async def take(self, reason: str) -> dict[str, Any]:
        """Take a backup now ('manual' or 'scheduled'); its record. Refused while one runs."""
        if self._lock.locked():
            raise ApiError("A backup is already running.", "backup_running",
                           "Wait for it: GET /api/backups shows it under `running`.", status=409)
        async with self._lock:
            path = self._new_path()
            started = time.time()
            self.running = {"file": path.name, "startedAt": round(started, 3), "reason": reason}
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._make_directory)
                code, output = await self._run(self._command("backup", str(path)))
            finally:
                self.running = None
            record: dict[str, Any] = {"file": path.name, "at": round(started, 3), "reason": reason,
                                      "durationSeconds": round(time.time() - started, 2), "ok": code == 0}
            if code == 0:
                try:
                    record["size"] = path.stat().st_size
                except OSError as error:  # deleted (DELETE /api/backups/...) the moment it was written
                    code, output = 1, f"the archive is gone: {error}"
                    record["ok"] = False
            if code == 0:
                removed = await asyncio.get_running_loop().run_in_executor(
                    None, prune, self.settings.directory, self.settings.keep)
                record["pruned"] = [old.name for old in removed]
            else:
                record["error"] = output.strip()[-OUTPUT_TAIL:]
                log.error("the %s backup failed: %s", reason, record["error"])
            self.last = record
            await asyncio.get_running_loop().run_in_executor(None, self._save_state)
            return record

    def _make_directory(self) -> None:
        self.settings.directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def restore(self, name: str, force: bool) -> dict[str, Any]:
        running = [row["id"] for row in self.supervisor.statuses() if row["running"]]
        if running:
            raise ApiError("A restore needs every service stopped.", "services_running",
                           f"Stop them first (POST /api/services/stop-all); running: {', '.join(running)}.",
                           status=409)
        path = self.path(name)
        if self._lock.locked():
            raise ApiError("A backup is running.", "backup_running", "Wait for it to finish.", status=409)
        async with self._lock:
            code, output = await self._run(self._command("restore", str(path), *(["--force"] if force else [])))
        if code != 0:
            message = next((line.removeprefix("Error: ") for line in reversed(output.strip().splitlines())
                            if line.startswith("Error: ")), output.strip()[-500:])
            status = 409 if "not empty" in message else 422
            raise ApiError(f"The restore was refused or failed: {message}",
                           "restore_refused" if status == 409 else "restore_failed",
                           "Nothing is touched until the archive checks out; see `output`.", status=status,
                           extra={"output": output.strip()[-OUTPUT_TAIL:]})
        return {"restored": name, "output": output.strip()[-OUTPUT_TAIL:]}

    def path(self, name: str) -> Path:
        path = self.settings.directory / name
        if not ARCHIVE_NAME.match(name) or not path.is_file():
            raise NotFound(f"No backup named {name!r}.", "unknown_backup", "GET /api/backups lists them.")
        return path

    def archives(self) -> list[dict[str, Any]]:
        """Blocking (a directory listing)."""
        found = []
        for path in backups_in(self.settings.directory):
            if not ARCHIVE_NAME.match(path.name):
                continue
            stat = path.stat()
            found.append({"name": path.name, "size": stat.st_size, "modifiedAt": round(stat.st_mtime, 3),
                          "encrypted": path.name.endswith(".enc")})
        return found

    def summary(self) -> dict[str, Any]:
        """What the dashboard shows (no disk access: it is polled every 5 s)."""
        return {"every": self.settings.every, "keep": self.settings.keep, "running": self.running,
                "last": self.last, "next": round(self.next_at, 3) if self.next_at else None}

    # ------------------------------------------------------------ the schedule

    def start(self, jobs: JobGroup) -> None:
        """The schedule, one of the console's jobs (`SCHEDULE_JOB`), when `every` is set."""
        if self.settings.every:
            jobs.start(SCHEDULE_JOB, self._schedule(self.settings.every))

    async def _schedule(self, every: float) -> None:
        """The next backup `every` seconds after the last one (kept across console restarts)."""
        while True:
            last_at = (self.last or {}).get("at") or 0
            self.next_at = max(time.time(), last_at + every) if last_at else time.time() + every
            await asyncio.sleep(max(0.0, self.next_at - time.time()))
            try:
                await self.take("scheduled")
            except ApiError:  # a manual one runs: the next round counts from it
                await asyncio.sleep(1)
            except Exception:
                log.exception("the scheduled backup could not run")
                self.last = {"at": round(time.time(), 3), "reason": "scheduled", "ok": False,
                             "error": "the backup could not be started (see the console's log)"}


BACKUPS = web.AppKey("console_backups", Backups)
# The scheduled backups' loop among the console's jobs.
SCHEDULE_JOB = "backup_schedule"


# ---------------------------------------------------------------- schemas

class BackupRecord(marshmallow.Schema):
    file = fields.String(metadata={"description": "The archive's name in the backup folder."})
    at = fields.Float(required=True, metadata={"description": "Unix seconds when it started."})
    reason = fields.String(required=True, metadata={"description": "`manual` or `scheduled`."})
    durationSeconds = fields.Float()
    ok = fields.Boolean(required=True)
    size = fields.Integer(metadata={"description": "Bytes (when ok)."})
    pruned = fields.List(fields.String(), metadata={"description": "Older archives deleted by `keep`."})
    error = fields.String(metadata={"description": "What `gateway backup` said (when not ok)."})


class RunningBackup(marshmallow.Schema):
    file = fields.String(required=True)
    startedAt = fields.Float(required=True)
    reason = fields.String(required=True)


class BackupsState(marshmallow.Schema):
    every = fields.Float(required=True, allow_none=True,
                         metadata={"description": "Seconds between scheduled backups; null: none scheduled."})
    keep = fields.Integer(required=True, metadata={"description": "Archives kept (0: all)."})
    running = fields.Nested(RunningBackup, required=True, allow_none=True)
    last = fields.Nested(BackupRecord, required=True, allow_none=True)
    next = fields.Float(required=True, allow_none=True, metadata={"description": "Unix seconds of the next "
                                                                                 "scheduled one."})


class ArchiveEntry(marshmallow.Schema):
    name = fields.String(required=True)
    size = fields.Integer(required=True)
    modifiedAt = fields.Float(required=True)
    encrypted = fields.Boolean(required=True)


class BackupsList(BackupsState):
    directory = fields.String(required=True)
    backups = fields.List(fields.Nested(ArchiveEntry), required=True, metadata={"description": "Newest first."})


class RestoreRequest(marshmallow.Schema):
    force = fields.Boolean(load_default=False, metadata={
        "description": "Replace what the data directory, database and blob storage hold."})


class Restored(marshmallow.Schema):
    restored = fields.String(required=True)
    output = fields.String(required=True, metadata={"description": "What `gateway restore` printed."})


# ---------------------------------------------------------------- routes

routes = web.RouteTableDef()
NAME_PATH = {"name": {"type": "string", "pattern": ARCHIVE_NAME.pattern}}


@routes.get("/api/backups", name="backups")
@api_doc("The backup folder's archives, the schedule, the running and the last backup",
         responses={200: BackupsList}, auth="console")
async def list_backups(request: web.Request) -> web.Response:
    backups = request.app[BACKUPS]
    archives = await asyncio.get_running_loop().run_in_executor(None, backups.archives)
    return web.json_response({**backups.summary(), "directory": str(backups.settings.directory),
                              "backups": archives})


@routes.post("/api/backups", name="backups_take")
@api_doc("Take a backup now (gateway backup, while the services run); answers when it is written",
         responses={200: BackupRecord}, errors=(409, 502), auth="console",
         description="409 `backup_running` while another runs; 502 `backup_failed` (with the record as "
                     "`backup`, whose `error` says why) when `gateway backup` fails.")
async def take_backup(request: web.Request) -> web.Response:
    record = await request.app[BACKUPS].take("manual")
    if not record["ok"]:
        raise ApiError("The backup failed.", "backup_failed", "`backup.error` says why.", status=502,
                       extra={"backup": record})
    return web.json_response(record)


@routes.get("/api/backups/{name}", name="backup_download")
@api_doc("Download an archive", responses={200: None}, produces="application/octet-stream", errors=(404,),
         auth="console", path=NAME_PATH)
async def download_backup(request: web.Request) -> web.StreamResponse:
    path = request.app[BACKUPS].path(request.match_info["name"])
    return web.FileResponse(path, headers={"Content-Disposition": f'attachment; filename="{path.name}"',
                                           "Content-Type": "application/octet-stream"})


@routes.delete("/api/backups/{name}", name="backup_delete")
@api_doc("Delete an archive", responses={200: {"type": "object"}}, errors=(404,), auth="console", path=NAME_PATH)
async def delete_backup(request: web.Request) -> web.Response:
    path = request.app[BACKUPS].path(request.match_info["name"])
    await asyncio.get_running_loop().run_in_executor(None, path.unlink)
    return web.json_response({"deleted": path.name})


@routes.post("/api/backups/{name}/restore", name="backup_restore")
@api_doc("Restore an archive (gateway restore) into the services' data directory, database and blob storage",
         body=RestoreRequest, body_required=False, responses={200: Restored}, errors=(404, 409, 422),
         auth="console", path=NAME_PATH,
         description="Every service must be stopped (409 `services_running`). The archive is checked whole "
                     "first; a target that holds data is refused without `force` (409 `restore_refused`); a "
                     "corrupt, truncated or undecryptable archive is 422 `restore_failed`. Start the services "
                     "afterwards: they index the vectors again.")
async def restore_backup(request: web.Request) -> web.Response:
    body = await parse_body(request, RestoreRequest(), allow_empty=True)
    return web.json_response(await request.app[BACKUPS].restore(request.match_info["name"], body["force"]))


def setup_backups(app: web.Application, config: Config, supervisor: Supervisor, jobs: JobGroup) -> Backups:
    backups = Backups(config, supervisor)
    app[BACKUPS] = backups
    app.router.add_routes(routes)

    async def backups_ctx(app: web.Application) -> AsyncIterator[None]:
        backups.start(jobs)
        yield
        await jobs.stop(SCHEDULE_JOB)

    app.cleanup_ctx.append(backups_ctx)
    return backups
