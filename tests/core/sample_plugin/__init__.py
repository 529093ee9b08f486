"""A small plugin the core tests register inline: one table, one route, one WebSocket type,
one job and one lifespan, so every registration path of the contract is exercised."""
import asyncio
from typing import Callable

import marshmallow
from aiohttp import web

from gateway.context import get_context
from gateway.contracts import ContractKey
from gateway.database import fetch_all, execute
from gateway.plugins import Plugin

routes = web.RouteTableDef()


@routes.post("/api/v1/notes", name="create_note")
async def create_note(request: web.Request) -> web.Response:
    from gateway.validation import parse_body

    body = await parse_body(request, NoteSchema())
    context = get_context(request)
    await execute(context.db, "INSERT INTO sample_notes (text) VALUES (%s)", (body["text"],))
    return web.json_response({"status": "created"}, status=201)


@routes.get("/api/v1/notes", name="list_notes")
async def list_notes(request: web.Request) -> web.Response:
    rows = await fetch_all(get_context(request).db, "SELECT id, text FROM sample_notes ORDER BY id")
    return web.json_response({"notes": rows})


@routes.get("/api/v1/boom", name="boom")
async def boom(request: web.Request) -> web.Response:
    raise RuntimeError("a bug in a handler")


class NoteSchema(marshmallow.Schema):
    text = marshmallow.fields.String(required=True, validate=marshmallow.validate.Length(min=1, max=100))


ECHO: ContractKey[Callable[[str], str]] = ContractKey("sample.echo")


class SamplePlugin(Plugin):
    name = "sample"
    version = "1.0"

    def __init__(self):
        self.events: list[str] = []

    def setup(self, registrar):
        registrar.routes(routes)
        registrar.migrations("tests.core.sample_plugin")
        registrar.provide(ECHO, lambda text: text)

        @registrar.ws_message("sample_ping", NoteSchema())
        async def on_ping(connection, message):
            connection.send({"type": "sample_pong", "text": message["text"]})

        async def lifespan(context):
            self.events.append("start")
            yield
            self.events.append("stop")

        registrar.lifespan(lifespan)

        async def ticker(context):
            self.events.append("job")
            await asyncio.sleep(3600)

        registrar.job("ticker", ticker)
