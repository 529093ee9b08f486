"""The one WebSocket error boundary (`gateway.ws.dispatch_frame`): a handler raises, and the
error frame carries the error's type and hint and names the frame it answers, with the
session and message ids the handler resolved."""
import marshmallow
from aiohttp import WSMsgType, web
from marshmallow import fields

from gateway.app import create_app
from gateway.context import get_context
from gateway.errors import Conflict
from gateway.identity import Identity
from gateway.plugins import Plugin
from gateway.ws import dispatch_frame

DEFAULT_SESSION = "the-connection-session"


class BookFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True)
    client_msg_id = fields.String(load_default=None, allow_none=True)


class CancelFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True)


class Booking(Plugin):
    """Frame handlers that raise and catch nothing, on a socket of its own."""
    name = "booking"

    def __init__(self, table):
        self.table = table

    def setup(self, registrar):
        registrar.routes(self.table)

        @registrar.ws_message("book", BookFrame())
        async def book(connection, frame):
            frame["session_id"] = frame["session_id"] or DEFAULT_SESSION  # resolved: the error names it
            raise Conflict("The slot is taken.", error_type="slot_taken", hint="Pick another slot.")

        @registrar.ws_message("cancel", CancelFrame())
        async def cancel(connection, frame):
            raise Conflict("Nothing to cancel.", error_type="nothing_booked")  # before any session is resolved

        @registrar.ws_message("crash")
        async def crash(connection, frame):
            raise RuntimeError("a bug")


async def test_a_handlers_api_error_is_one_error_frame_naming_what_it_answers(aiohttp_client, config):
    ticks = iter(range(1, 100))

    async def socket(request):
        identity = Identity("someone", "someone")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        connection = await get_context(request).hub.register(ws, identity.user_id, identity=identity)
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:  # fields given when an error is sent: a clock
                    await dispatch_frame(request.app, connection, frame.data,
                                         error_fields=lambda: {"channel": "booking", "tick": next(ticks)})
        finally:
            await get_context(request).hub.unregister(connection)
        return ws

    table = web.RouteTableDef()
    table.get("/ws/booking")(socket)
    client = await aiohttp_client(create_app("svc", config, plugins=[Booking(table)]))
    async with client.ws_connect("/ws/booking") as ws:
        await ws.send_json({"type": "book", "session_id": "s1", "client_msg_id": "m1"})
        assert await ws.receive_json() == {
            "type": "error", "error": "The slot is taken.", "errorType": "slot_taken", "hint": "Pick another slot.",
            "session_id": "s1", "client_msg_id": "m1", "channel": "booking", "tick": 1}
        # The session the handler resolved; a message id the frame did not give is null.
        await ws.send_json({"type": "book"})
        assert await ws.receive_json() == {
            "type": "error", "error": "The slot is taken.", "errorType": "slot_taken", "hint": "Pick another slot.",
            "session_id": DEFAULT_SESSION, "client_msg_id": None, "channel": "booking", "tick": 2}
        # No hint, no session resolved, no client_msg_id field in this frame type: none of them.
        await ws.send_json({"type": "cancel"})
        assert await ws.receive_json() == {"type": "error", "error": "Nothing to cancel.",
                                           "errorType": "nothing_booked", "channel": "booking", "tick": 3}
        # Any other failure: a fixed sentence, still naming the frame; what a frame without a
        # schema holds is echoed only when it is a string.
        await ws.send_json({"type": "crash", "session_id": "s2", "client_msg_id": {"not": "an id"}})
        assert await ws.receive_json() == {"type": "error", "error": "the server failed to handle a 'crash' frame",
                                           "session_id": "s2", "channel": "booking", "tick": 4}
        # Errors before any handler (not JSON) get the endpoint's fields too, and the socket stays open.
        await ws.send_str("{not json")
        reply = await ws.receive_json()
        assert "not valid JSON" in reply["error"] and reply["tick"] == 5 and "session_id" not in reply
