"""The AsyncAPI document is generated from the WebSocket frame types the plugins register (what
clients send, with the schemas the dispatch validates with) and declare (what the service
sends), validates against the official AsyncAPI 3.0.0 JSON Schema, and is served by every
service that has WebSocket frame types."""
import marshmallow
import pytest
from aiohttp import web
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

from gateway.app import create_app
from gateway.asyncapi import build_document, service_channels, websocket_endpoint
from gateway.plugins import REGISTRY, Plugin, PluginError
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.support.asyncapi import FrameChecker, validate_document


class NoteIn(marshmallow.Schema):
    text = marshmallow.fields.String(required=True, validate=marshmallow.validate.Length(max=100))


class NoteAdded(marshmallow.Schema):
    id = marshmallow.fields.Integer(required=True)
    text = marshmallow.fields.String(required=True)


class Query(marshmallow.Schema):
    room = marshmallow.fields.String()


routes = web.RouteTableDef()


@routes.get("/ws/notes", name="notes.ws", allow_head=False)
@websocket_endpoint("Notes as they are written", query=Query)
async def notes_socket(request):  # never opened: only its documentation is read
    raise web.HTTPNotImplemented()


class NotesPlugin(Plugin):
    name = "notes"

    def setup(self, registrar):
        registrar.routes(routes)
        registrar.ws_message("note_add", NoteIn())(self.on_add)
        registrar.ws_message("note_ping")(self.on_add)
        registrar.ws_server_message("note_added", NoteAdded, "A note was written.")

    async def on_add(self, connection, message):
        pass


def test_the_document_is_valid_asyncapi_3_with_every_registered_frame(make_config):
    app = create_app("svc", make_config(), plugins=[NotesPlugin()])
    document = build_document("svc", "1", service_channels(app))
    validate_document(document)
    assert document["asyncapi"] == "3.0.0"
    channel = document["channels"]["ws.notes"]
    assert channel["address"] == "/ws/notes"
    assert channel["bindings"]["ws"]["query"]["properties"] == {"room": {"type": "string"}}
    assert set(channel["messages"]) == {"client.note_add", "client.note_ping", "server.note_added", "server.error"}
    messages = document["components"]["messages"]
    note_add = messages["client.note_add"]["payload"]
    assert note_add["properties"]["type"] == {"type": "string", "const": "note_add"}
    assert note_add["properties"]["text"] == {"type": "string", "maxLength": 100}
    assert note_add["required"] == ["text", "type"]
    assert "additionalProperties" not in note_add  # the dispatch ignores fields it does not know
    added = messages["server.note_added"]
    assert added["summary"] == "A note was written."
    assert added["payload"]["additionalProperties"] is False and added["payload"]["required"] == ["id", "text", "type"]
    # No plugin declared `error`: the core's (what its dispatch answers bad frames with) is there.
    assert messages["server.error"]["payload"]["required"] == ["error", "type"]
    operations = document["operations"]
    assert operations["ws.notes.receive"]["action"] == "receive"
    assert {m["$ref"] for m in operations["ws.notes.send"]["messages"]} == {
        "#/channels/ws.notes/messages/server.note_added", "#/channels/ws.notes/messages/server.error"}
    assert operations["ws.notes.send"]["security"] == [{"$ref": "#/components/securitySchemes/bearer"},
                                                        {"$ref": "#/components/securitySchemes/tokenQuery"}]


def test_a_frame_outside_the_document_fails_the_check(make_config):
    """What the chat and console tests rely on: an undocumented type, or a field out of place, fails."""
    app = create_app("svc", make_config(), plugins=[NotesPlugin()])
    checker = FrameChecker(build_document("svc", "1", service_channels(app)))
    checker.check({"type": "note_added", "id": 1, "text": "hi"})
    with pytest.raises(AssertionError, match="'note_removed' is sent but not documented"):
        checker.check({"type": "note_removed", "id": 1})
    with pytest.raises(AssertionError, match="does not fit"):
        checker.check({"type": "note_added", "id": 1, "text": "hi", "colour": "red"})
    with pytest.raises(AssertionError, match="does not fit"):
        checker.check({"type": "note_added", "id": "1", "text": "hi"})
    assert checker.seen == {"note_added": 1}


def test_a_server_frame_type_declared_twice_stops_start_up(make_config):
    class Other(Plugin):
        name = "other"

        def setup(self, registrar):
            registrar.ws_server_message("note_added", NoteAdded, "Also a note.")

    with pytest.raises(PluginError, match="'note_added' is declared by both 'notes' and 'other'"):
        create_app("svc", make_config(), plugins=[NotesPlugin(), Other()])


async def test_the_gateway_serves_its_document_with_every_client_type_and_its_schema(aiohttp_client, make_config,
                                                                                     database_url):
    config = make_config({"database.url": database_url})
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin,
                                             chat_plugin, notifications_plugin])
    client = await aiohttp_client(app)
    response = await client.get("/api/v1/asyncapi.json")
    assert response.status == 200
    document = await response.json()
    validate_document(document)
    channel = document["channels"]["ws.chat"]
    assert channel["address"] == "/ws/chat"
    registry = app[REGISTRY]
    # Each client type with the JSON Schema of the very schema the dispatch validates it with.
    plugin = MarshmallowPlugin()
    APISpec("check", "1", "3.1.0", plugins=[plugin])
    for kind, registered in registry.ws_types.items():
        assert f"client.{kind}" in channel["messages"], kind
        payload = document["components"]["messages"][f"client.{kind}"]["payload"]
        expected = plugin.converter.schema2jsonschema(registered.schema)["properties"] if registered.schema else {}
        assert payload["properties"] == {"type": {"type": "string", "const": kind}, **expected}, kind
    assert {"message", "ping", "history"} <= set(registry.ws_types)
    server_types = {key.removeprefix("server.") for key in channel["messages"] if key.startswith("server.")}
    assert server_types == set(registry.ws_server_types)
    assert {"stream_start", "stream_chunk", "stream_end", "error", "notification", "multi_message"} <= server_types
    # The spec's ServerMessage fields: the device an echo came from, several messages together,
    # and the turn's mode on the reply's frames; and a message's own device fields (ClientMessage).
    messages = document["components"]["messages"]
    schemas = document["components"]["schemas"]

    def properties(payload: dict) -> dict:
        return schemas[payload["$ref"].rsplit("/", 1)[-1]]["properties"] if "$ref" in payload else payload["properties"]

    echo = messages["server.response"]["payload"]["properties"]["client_info"]
    assert set(properties(echo)) == {"client_id", "device_name", "user_agent"}
    multi = properties(messages["server.multi_message"]["payload"]["properties"]["multi_message"])
    item = properties(multi["messages"]["items"])
    assert {"index", "content", "msg_type"} <= set(item)
    assert item["msg_type"]["enum"] == ["chat", "action", "system_info"]
    for kind in ("stream_start", "stream_chunk", "thinking", "tool_progress", "review", "stream_end"):
        payload = messages[f"server.{kind}"]["payload"]
        assert payload["properties"]["response_mode"]["enum"] == ["text", "voice_msg", "voice_assistant"], kind
    for kind in ("stream_start", "stream_chunk", "review", "stream_end"):
        assert "response_mode" in messages[f"server.{kind}"]["payload"]["required"], kind
    assert {"client_id", "device_name", "user_agent"} <= set(messages["client.message"]["payload"]["properties"])
    # Linked from the docs page, and itself in the OpenAPI document.
    openapi = await (await client.get("/api/v1/openapi.json")).json()
    assert "x-undocumented" not in openapi["paths"]["/api/v1/asyncapi.json"]["get"]
    page = await (await client.get("/api/v1/docs")).text()
    assert "href='/api/v1/asyncapi.json'" in page


async def test_a_service_without_websocket_frames_has_no_document(aiohttp_client, make_config):
    client = await aiohttp_client(create_app("ai-core", make_config(), plugins=[tokens_plugin]))
    assert (await client.get("/api/v1/asyncapi.json")).status == 404
    assert "asyncapi.json" not in await (await client.get("/api/v1/docs")).text()
