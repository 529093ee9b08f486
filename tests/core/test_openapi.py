"""The OpenAPI document is generated from the routes and their schemas, and served by every service."""
import marshmallow
import pytest
from aiohttp import web
from openapi_spec_validator import validate

from gateway.app import create_app
from gateway.openapi import Credential, api_doc, build_document, undocumented
from gateway.plugins import Plugin


class NoteIn(marshmallow.Schema):
    text = marshmallow.fields.String(required=True)


class NoteOut(marshmallow.Schema):
    id = marshmallow.fields.Integer(required=True)
    text = marshmallow.fields.String(required=True)


class Paging(marshmallow.Schema):
    limit = marshmallow.fields.Integer(load_default=20)


routes = web.RouteTableDef()


@routes.post("/api/v1/notes", name="add_note")
@api_doc("Add a note", body=NoteIn, responses={201: NoteOut}, errors=(409,))
async def add_note(request):
    return web.json_response({"id": 1, "text": "x"}, status=201)


@routes.get("/api/v1/notes/{note_id}", name="get_note")
@api_doc("One note", query=Paging, responses={200: NoteOut}, errors=(404,), auth="admin")
async def get_note(request):
    return web.json_response({"id": 1, "text": "x"})


@routes.delete("/api/v1/notes/{note_id}", name="delete_note")
async def delete_note(request):  # deliberately undocumented
    return web.json_response({})


class NotesPlugin(Plugin):
    name = "notes"

    def setup(self, registrar):
        registrar.routes(routes)


@pytest.fixture
def app(make_config):
    return create_app("svc", make_config(), plugins=[NotesPlugin()])


def test_document_is_valid_openapi_3_1_with_the_declared_schemas(app):
    document = build_document(app, "svc", "1")
    validate(document)
    assert document["openapi"] == "3.1.0"
    post = document["paths"]["/api/v1/notes"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/NoteIn"}
    assert post["responses"]["201"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/NoteOut"}
    assert {"400", "401", "409", "500"} <= set(post["responses"])
    assert post["responses"]["409"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    get = document["paths"]["/api/v1/notes/{note_id}"]["get"]
    names = {(p["in"], p["name"]) for p in get["parameters"]}
    assert {("path", "note_id"), ("query", "limit")} <= names
    assert {"401", "403", "404"} <= set(get["responses"])
    assert document["components"]["schemas"]["ErrorBody"]["required"] == ["error", "errorType"]


def test_an_undocumented_route_is_flagged(app):
    assert undocumented(build_document(app, "svc", "1")) == ["DELETE /api/v1/notes/{note_id}"]


async def test_every_service_serves_its_document_and_a_docs_page(aiohttp_client, app):
    client = await aiohttp_client(app)
    response = await client.get("/api/v1/openapi.json")
    assert response.status == 200
    document = await response.json()
    assert "/api/v1/health" in document["paths"] and "/api/v1/openapi.json" in document["paths"]
    page = await client.get("/api/v1/docs")
    assert page.status == 200 and page.content_type == "text/html"
    text = await page.text()
    assert "/api/v1/notes/{note_id}" in text and "<script" not in text.lower()


class UploadForm(marshmallow.Schema):
    file = marshmallow.fields.Raw(required=True, metadata={"type": "string", "format": "binary"})


class Export(marshmallow.Schema):
    text = marshmallow.fields.String(required=True)


def other_note_out():
    """A second schema named NoteOut, as a second plugin of the same service might declare."""
    class NoteOut(marshmallow.Schema):
        size = marshmallow.fields.Integer(required=True)
    return NoteOut


more_routes = web.RouteTableDef()


@more_routes.get("/api/v1/notes/{note_id}/export", name="export_note")
@api_doc("A note as a file", responses={200: {"application/json": Export, "text/markdown": None}},
         response_headers={"Content-Disposition": "attachment"}, path={"note_id": {"pattern": "^[0-9]+$"}})
async def export_note(request):
    return web.json_response({"text": "x"})


@more_routes.post("/api/v1/notes/upload", name="upload_note")
@api_doc("Upload a note", body={"multipart/form-data": UploadForm, "application/json": NoteIn},
         responses={201: other_note_out()}, auth="optional", headers={"X-Signature": "who signed it"})
async def upload_note(request):
    return web.json_response({"size": 1}, status=201)


@more_routes.get("/api/v1/notes/{note_id}/picture", name="note_picture")
@api_doc("A note's picture", body=NoteIn, body_required=False, responses={200: {"image/png": None}, 204: None})
async def note_picture(request):
    return web.Response(status=204)


# A credential the core does not know: the plugin declares it, with its scheme.
SIGNED = Credential(requirements=(("noteSignature",), ("bearer",)), errors=(401, 403),
                    schemes={"noteSignature": {"type": "apiKey", "in": "header", "name": "X-Note-Signature"}})


@more_routes.post("/api/v1/notes/signed", name="signed_note")
@api_doc("A note from a partner that signs its requests", body=NoteIn, auth=SIGNED)
async def signed_note(request):
    return web.json_response({"size": 1})


class MorePlugin(Plugin):
    name = "more_notes"

    def setup(self, registrar):
        registrar.routes(more_routes)


def test_several_media_types_headers_and_path_patterns(make_config):
    app = create_app("svc", make_config(), plugins=[NotesPlugin(), MorePlugin()])
    document = build_document(app, "svc", "1")
    validate(document)
    export = document["paths"]["/api/v1/notes/{note_id}/export"]["get"]
    assert export["parameters"] == [{"name": "note_id", "in": "path", "required": True,
                                     "schema": {"type": "string", "pattern": "^[0-9]+$"}}]
    answer = export["responses"]["200"]
    assert answer["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/Export"}},
                                 "text/markdown": {"schema": {"type": "string"}}}
    assert answer["headers"]["Content-Disposition"]["schema"] == {"type": "string"}
    assert "400" in export["responses"]  # a path parameter: a NUL in it is refused

    upload = document["paths"]["/api/v1/notes/upload"]["post"]
    assert upload["security"] == [{}, {"bearer": []}] and "401" in upload["responses"]
    assert set(upload["requestBody"]["content"]) == {"multipart/form-data", "application/json"}
    assert upload["requestBody"]["required"] is True and "413" in upload["responses"]
    assert upload["parameters"][0]["in"] == "header" and upload["parameters"][0]["name"] == "X-Signature"
    # Two schemas named NoteOut in one service: both kept, under different names, without a warning.
    created = upload["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert created != "NoteOut" and created.endswith("NoteOut")
    assert document["components"]["schemas"][created]["required"] == ["size"]
    assert document["components"]["schemas"]["NoteOut"]["required"] == ["id", "text"]

    signed = document["paths"]["/api/v1/notes/signed"]["post"]
    assert signed["security"] == [{"noteSignature": []}, {"bearer": []}]
    assert {"401", "403"} <= set(signed["responses"])
    assert document["components"]["securitySchemes"]["noteSignature"]["name"] == "X-Note-Signature"
    assert "webhookKey" not in document["components"]["securitySchemes"]  # only what a plugin declared

    picture = document["paths"]["/api/v1/notes/{note_id}/picture"]["get"]
    assert picture["requestBody"]["required"] is False
    assert picture["responses"]["200"]["content"] == {"image/png": {"schema": {"type": "string", "format": "binary"}}}
    assert "content" not in picture["responses"]["204"]


def test_declarations_that_cannot_be_right_are_refused_when_made_or_built(make_config):
    with pytest.raises(ValueError, match="auth 'someone'"):
        api_doc("x", auth="someone")
    wrong = web.RouteTableDef()

    @wrong.get("/api/v1/things/{thing_id}", name="thing")
    @api_doc("A thing", path={"id": {"pattern": "^x$"}})
    async def thing(request):
        return web.json_response({})

    class WrongPlugin(Plugin):
        name = "wrong"

        def setup(self, registrar):
            registrar.routes(wrong)

    with pytest.raises(ValueError, match="no path parameter id"):
        build_document(create_app("svc", make_config(), plugins=[WrongPlugin()]), "svc", "1")
