"""Serving one service in this process (`gateway serve`, or one of its workers): the event loop,
the runner whose connections answer HTTP parser errors in the spec's body, an access log without
query strings, the garbage collector settled after start-up, and draining on SIGTERM or when a
replacement already serves the port. The app itself is built by gateway/app.py."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
from pathlib import Path
from typing import Callable

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_runner import GracefulExit

from . import idle, memory_snapshots
from .app import create_app
from .config import Config, ConfigError
from .context import CONTEXT
from .errors import ApiError
from .services import get_service
from .typedefs import REQUEST_ID, WORKER_INDEX
from .worker_process import REPLACED_SIGNAL, watch_parent

# The logger these lines always had: log filters and readers name it.
log = logging.getLogger("gateway.app")


class AccessLogger(AbstractAccessLogger):
    """Logs the path without its query string: tokens travel in queries (WebSocket) and must
    never reach a log."""

    def log(self, request: BaseRequest, response: web.StreamResponse,  # noqa: A003 - aiohttp's interface
            time_taken: float) -> None:
        self.logger.info('%s "%s %s" %s %.1fms %s', request.remote, request.method, request.path,
                         response.status, time_taken * 1000, request.get(REQUEST_ID, "-"))


WORKER_HEADER = "Gateway-Worker"


async def _name_worker(request: web.Request, response: web.StreamResponse) -> None:
    """Each answer of one of several workers says which (the WebSocket handshake's too): the
    operator and the tests see where a connection landed."""
    response.headers[WORKER_HEADER] = str(request.app[WORKER_INDEX])


def new_event_loop(config: Config) -> asyncio.AbstractEventLoop:
    """The loop a service runs on (`core.event_loop`). uvloop's sockets and callbacks are
    written in C: relaying a streamed reply costs about a third less CPU per event than on
    asyncio's own loop, which decides how many chat sessions one instance carries."""
    choice = config.settings.core.event_loop
    if choice not in ("uvloop", "asyncio"):
        raise ConfigError(f"core.event_loop: {choice!r} is not one of uvloop, asyncio")
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:  # not built for this platform (Windows): the standard loop works the same
            log.warning("core.event_loop is uvloop, which is not installed here; using asyncio's loop")
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class SpecErrorRequestHandler(RequestHandler):
    """Answers what aiohttp's parser refuses before any middleware runs (an over-long request
    line or header, too many headers, a malformed request line) with the spec's error body
    instead of aiohttp's plain text."""

    __slots__ = ()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs it, and refuses once bytes went out
        error = parser_error(status, exc)
        response = web.json_response(error.body(), status=error.status)
        response.force_close()
        return response


def parser_error(status: int, exc: BaseException | None) -> ApiError:
    """The spec's error for what aiohttp's protocol answers by itself (`status` is its choice)."""
    if isinstance(exc, LineTooLong) or (isinstance(exc, BadHttpMessage) and "too many" in exc.message.lower()):
        return ApiError("The request line or its headers are too large.", error_type="request_too_large",
                        status=431, hint="Send a shorter address (data belongs in the body) and fewer or "
                                         "shorter headers.")
    if 400 <= status < 500:
        return ApiError("The request could not be parsed as HTTP.", error_type="malformed_request",
                        status=status, hint="Check the request line and the headers.")
    if status == 504:
        return ApiError("The server took too long to answer.", error_type="timeout", status=504)
    return ApiError("Internal server error.", error_type="internal_error", status=status,
                    hint="Details are in the service log.")


class SpecErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return SpecErrorRequestHandler(self, loop=self._loop, **self._kwargs)


class ServiceRunner(web.AppRunner):
    """`web.AppRunner` whose connections answer parser errors in the spec's body."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return SpecErrorServer(server.request_handler, request_factory=server.request_factory,
                               handler_cancellation=server.handler_cancellation, loop=server._loop,
                               **server._kwargs)


# The cyclic collector's thresholds while serving (Python's are 700, 10, 10): at 700 objects merely
# in flight get promoted, so the passes that walk every open connection's objects run every second.
GC_THRESHOLDS = (10_000, 10, 10)


def settle_garbage_collector() -> None:
    """Leave what start-up built (every plugin, route, schema and client: it lives as long as the
    process) out of the cyclic garbage collector's passes, and make the passes rarer (see
    GC_THRESHOLDS): each full pass walked all of it while requests ran."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(app: web.Application, host: str, port: int, *, shutdown_timeout: float,
                on_listening: Callable[[int], None] | None = None, reuse_port: bool = False) -> None:
    """Run `app` on host:port until cancelled; SIGINT and SIGTERM stop it (`GracefulExit`) and
    the runner's cleanup drains it (what `web.run_app` does, with `ServiceRunner`)."""
    runner = ServiceRunner(app, handle_signals=True, access_log_class=AccessLogger,
                           shutdown_timeout=shutdown_timeout, keepalive_timeout=75.0)
    await runner.setup()
    settle_garbage_collector()
    try:
        site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
        await site.start()
        if on_listening is not None:
            on_listening(site.port)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def _stop_replaced(app: web.Application, who: str) -> None:
    log.info("%s: replaced (rolling restart); draining, its WebSockets told to reconnect (1012)", who)
    app[CONTEXT].hub.replaced()
    os.kill(os.getpid(), signal.SIGTERM)  # then as any stop: aiohttp's own SIGTERM handler drains


def listen_host(config: Config, service_id: str, host: str | None = None) -> str:
    """Where a service listens: `--host`, else `[core] listen_hosts.<service id>`, else loopback
    only (a phone on the network reaches the web client once `frontend = "0.0.0.0"` is set)."""
    return host or config.settings.core.listen_hosts.get(service_id) or "127.0.0.1"


def run(service_id: str, host: str | None = None, port: int | None = None, config: Config | None = None,
        worker_index: int | None = None, reuse_port: bool = False, ready_file: Path | None = None) -> None:
    """Serve `service_id` in this process; `worker_index`: as one of `gateway serve --workers N`'s
    processes (gateway.workers), sharing the port and stopping when the parent is gone.
    `reuse_port`: bind with SO_REUSEPORT, so that a replacement can serve the port beside this
    process before it stops; `ready_file`: written once the port is served (what the starter of a
    replacement waits for: a health check on a shared port may be answered by the old process)."""
    config = config or Config.load()
    idle.limit_malloc_arenas(config.settings.core.malloc_arenas)
    spec = get_service(service_id, data_dir=config.data_dir)
    loop = new_event_loop(config)
    asyncio.set_event_loop(loop)
    memory_snapshots.start(loop, service_id, config.data_dir)  # MEMORY_SNAPSHOTS: off unless set
    app = create_app(service_id, config, spec=spec)
    if worker_index is not None:
        app[WORKER_INDEX] = worker_index
        app.on_response_prepare.append(_name_worker)
        watch_parent(loop)
    host = listen_host(config, service_id, host)
    who = service_id if worker_index is None else f"{service_id} worker {worker_index} (pid {os.getpid()})"
    if REPLACED_SIGNAL is not None:
        loop.add_signal_handler(REPLACED_SIGNAL, _stop_replaced, app, who)

    def listening(bound: int) -> None:
        log.info("%s listening on %s:%s (event loop: %s)", who, host, bound, type(loop).__module__.split(".")[0])
        if ready_file is not None:
            ready_file.write_text(f"{os.getpid()} {bound}\n")

    main = loop.create_task(serve(
        app, host, port or spec.port, shutdown_timeout=config.settings.core.shutdown_timeout,
        reuse_port=reuse_port or worker_index is not None, on_listening=listening))
    try:
        loop.run_until_complete(main)
    except (GracefulExit, KeyboardInterrupt):  # SIGTERM or SIGINT: drain and stop
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
