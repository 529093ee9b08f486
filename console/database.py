"""The database panel: which database servers answer (PostgreSQL, Redis, Qdrant, MinIO, NATS at the
addresses the configuration names, else their usual local ports), the embedded PostgreSQL of
DATA_DIR, the memory table's row count (from the memory service), and the optional container
stack of conf/docker-compose.yml (console/containers.py, run in an executor)."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import marshmallow
from aiohttp import web
from marshmallow import fields

from gateway.config import Config
from gateway.embedded_database import embedded_port, embedded_status
from gateway.errors import ApiError
from gateway.openapi import api_doc

from . import containers
from .peers import PeerError, Peers

PORT_TIMEOUT = 1.0
MEMORY_SERVICE = "memory-service"
ACTIONS = {"start": (containers.stack_up, "up"), "stop": (containers.stack_down, "down")}


async def port_check(host: str, port: int, timeout: float = PORT_TIMEOUT) -> tuple[bool, float | None]:
    started = time.monotonic()
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False, None
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True, round((time.monotonic() - started) * 1000, 1)


def embedded_postgres(data_dir: Path) -> dict[str, Any]:
    """The embedded server's pid file: running or not, and the port it listens on. Blocking (small reads)."""
    status = embedded_status(data_dir)
    return {"pgdata": status["pgdata"], "running": bool(status["running"]), "pid": status.get("pid"),
            "port": embedded_port(data_dir / "postgres")}


class DatabasePanel:
    def __init__(self, config: Config, peers: Peers):
        self.config = config
        self.peers = peers
        self.data_dir = config.data_dir
        self._compose_lock = asyncio.Lock()

    async def ports(self) -> list[dict[str, Any]]:
        addresses = containers.server_addresses(self.config)
        results = await asyncio.gather(*(port_check(entry["host"], entry["port"]) for entry in addresses))
        return [{**entry, "open": is_open, "latencyMs": latency} for entry, (is_open, latency) in zip(addresses, results)]

    async def embedded(self) -> dict[str, Any]:
        status = await asyncio.get_running_loop().run_in_executor(None, embedded_postgres, self.data_dir)
        status["open"] = bool(status["port"]) and (await port_check("127.0.0.1", status["port"]))[0]
        return status

    async def memory_rows(self) -> dict[str, Any]:
        try:
            page = await self.peers.get_json(MEMORY_SERVICE, "/api/v1/memories", params={"limit": "1"})
        except PeerError as error:
            return unavailable(error)
        return {"available": True, "rows": int(page.get("total", 0))}

    async def online(self, ports: list[dict] | None = None, embedded: dict | None = None) -> dict[str, Any]:
        """Whether the PostgreSQL the services use answers: DATABASE_URL's, else the embedded one."""
        url = self.config.settings.database.url
        if url:
            entry = next(e for e in (ports or await self.ports()) if e["name"] == "PostgreSQL")
            return {"online": entry["open"], "source": "DATABASE_URL", "host": entry["host"], "port": entry["port"]}
        embedded = embedded or await self.embedded()
        return {"online": embedded["running"] and embedded["open"], "source": "embedded", "host": "127.0.0.1",
                "port": embedded["port"]}

    async def status(self) -> dict[str, Any]:
        ports, embedded, memory = await asyncio.gather(self.ports(), self.embedded(), self.memory_rows())
        return {**await self.online(ports, embedded), "ports": ports, "embedded": embedded, "memoryTable": memory,
                "checkedAt": round(time.time(), 3)}

    async def compose(self, action: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        async with self._compose_lock:
            steps = ["stop", "start"] if action == "restart" else [action]
            outputs = []
            for step in steps:
                run, verb = ACTIONS[step]
                try:
                    result = await loop.run_in_executor(None, run)
                except containers.DockerUnavailable as error:
                    raise ApiError(str(error), "docker_unavailable",
                                   "The services run on the embedded defaults without Docker; install Docker only "
                                   "for the container stack.", status=503) from None
                except OSError as error:  # the client vanished or cannot run
                    raise ApiError(f"docker compose could not run: {error}", "docker_unavailable", status=503) from None
                outputs.append(result.output)
                if result.code != 0:
                    raise ApiError(f"docker compose {verb} failed with exit code {result.code}.", "compose_failed",
                                   "Read `output`.", status=502, extra={"output": result.output[-4000:]})
        return {"action": action, "output": "\n".join(outputs)[-4000:], "ports": await self.ports()}


def unavailable(error: ApiError) -> dict[str, Any]:
    return {"available": False, "error": error.error, "errorType": error.error_type}


# ---------------------------------------------------------------- schemas

class Unavailable(marshmallow.Schema):
    available = fields.Boolean(required=True, metadata={"description": "False: the source did not answer."})
    error = fields.String(required=True)
    errorType = fields.String(required=True)


class PortCheck(marshmallow.Schema):
    name = fields.String(required=True, metadata={"description": "PostgreSQL, Redis, Qdrant, MinIO or NATS."})
    host = fields.String(required=True)
    port = fields.Integer(required=True)
    source = fields.String(required=True, metadata={
        "description": "`default`, or the variable whose URL named the address (DATABASE_URL...)."})
    open = fields.Boolean(required=True, metadata={"description": "A TCP connection succeeded within 1 s."})
    latencyMs = fields.Float(required=True, allow_none=True)


class EmbeddedPostgres(marshmallow.Schema):
    pgdata = fields.String(required=True)
    running = fields.Boolean(required=True)
    pid = fields.Integer(required=True, allow_none=True)
    port = fields.Integer(required=True, allow_none=True)
    open = fields.Boolean(required=True)


class MemoryTable(marshmallow.Schema):
    available = fields.Boolean(required=True)
    rows = fields.Integer(metadata={"description": "Rows of the memories table (when available)."})
    error = fields.String()
    errorType = fields.String()


class DatabaseOnline(marshmallow.Schema):
    online = fields.Boolean(required=True, metadata={"description": "The PostgreSQL the services use answers."})
    source = fields.String(required=True, metadata={"description": "`DATABASE_URL` or `embedded`."})
    host = fields.String(required=True)
    port = fields.Integer(required=True, allow_none=True)


class DatabaseStatus(DatabaseOnline):
    ports = fields.List(fields.Nested(PortCheck), required=True)
    embedded = fields.Nested(EmbeddedPostgres, required=True)
    memoryTable = fields.Nested(MemoryTable, required=True)
    checkedAt = fields.Float(required=True, metadata={"description": "Unix seconds."})


class ComposeDone(marshmallow.Schema):
    action = fields.String(required=True, metadata={"description": "`start`, `stop` or `restart`."})
    output = fields.String(required=True, metadata={"description": "What docker compose printed (last 4000 characters)."})
    ports = fields.List(fields.Nested(PortCheck), required=True, metadata={"description": "The checks after it."})


# ---------------------------------------------------------------- routes

routes = web.RouteTableDef()


@routes.get("/api/database/status", name="database_status")
@api_doc("Port checks of the database servers, the embedded PostgreSQL, and the memory table's row count",
         responses={200: DatabaseStatus}, auth="console")
async def database_status(request: web.Request) -> web.Response:
    return web.json_response(await request.app[DATABASE].status())


@routes.get("/api/db/status", name="db_status")
@api_doc("Whether the PostgreSQL the services use answers", responses={200: DatabaseOnline}, auth="console")
async def db_status(request: web.Request) -> web.Response:
    return web.json_response(await request.app[DATABASE].online())


def _compose_route(action: str, summary: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(await request.app[DATABASE].compose(action))
    handler.__name__ = f"db_{action}"
    return api_doc(summary, responses={200: ComposeDone}, errors=(502, 503), auth="console",
                   description="503 `docker_unavailable` when there is no Docker client or engine; 502 "
                               "`compose_failed` (with `output`) when docker compose fails.")(handler)


for _action, _summary in (("start", "Start the container stack (docker compose up -d)"),
                          ("stop", "Stop the container stack (docker compose down)"),
                          ("restart", "Stop, then start the container stack")):
    routes.post(f"/api/db/{_action}", name=f"db_{_action}")(_compose_route(_action, _summary))


DATABASE = web.AppKey("console_database", DatabasePanel)
