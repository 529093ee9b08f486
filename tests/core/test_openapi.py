"""The OpenAPI document is generated from the routes and their schemas, and served by every service."""
import marshmallow
import pytest
from aiohttp import web
from openapi_spec_validator import validate

from gateway.app import create_app
from gateway.openapi import api_doc, build_document, undocumented
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
