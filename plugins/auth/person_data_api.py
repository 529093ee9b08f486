"""One person's data in this service, for the service credential: `GET` counts it, `DELETE`
erases it (docs/auth.md, "PERSON_DATA"). Served by `auth_tokens`, so every service answers the
same shape over its own `PERSON_DATA` registry; the gateway's deletion of a person calls it on
the memory service, the AI core, the IoT service and the platform bridge."""
from __future__ import annotations

from typing import cast

from aiohttp import web
from marshmallow import Schema, fields

from gateway.context import get_context
from gateway.errors import Forbidden
from gateway.identity import require_user
from gateway.openapi import api_doc

from .contract import PERSON_DATA
from .person_data import PersonData as PersonDataRegistry

routes = web.RouteTableDef()

PATH = "/api/v1/people/{user_id}/data"
USER_ID_PATH = {"user_id": {"type": "string", "minLength": 1, "maxLength": 128}}


class PersonDataCounts(Schema):
    user_id = fields.String(required=True)
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True, metadata={
        "description": "What this service keeps of the person, by kind (after DELETE: what it removed)."})


async def _registry(request: web.Request) -> PersonDataRegistry | None:
    identity = await require_user(request)
    if identity.kind != "service":
        raise Forbidden("Only the service credential reaches a person's data here.", error_type="forbidden",
                        hint="The administrator deletes a person through the gateway: "
                             "DELETE /api/v1/admin/users/{id}.")
    # None: no plugin of this service keeps anything of a person (the IoT and voice services).
    # auth_tokens provides its own registry, which also counts and erases (person_data.py).
    return cast("PersonDataRegistry | None", get_context(request).contracts.get(PERSON_DATA))


@routes.get(PATH, name="person_data.count")
@api_doc("Count what this service keeps of one person", responses={200: PersonDataCounts},
         errors=(403, 503), auth="peer", tags=("people",), path=USER_ID_PATH)
async def count_person_data(request: web.Request) -> web.Response:
    registry = await _registry(request)
    user_id = request.match_info["user_id"]
    counts = await registry.count(user_id) if registry is not None else {}
    return web.json_response({"user_id": user_id, "counts": counts})


@routes.delete(PATH, name="person_data.erase")
@api_doc("Erase everything this service keeps of one person (idempotent); answers what went",
         responses={200: PersonDataCounts}, errors=(403, 503), auth="peer", tags=("people",), path=USER_ID_PATH)
async def erase_person_data(request: web.Request) -> web.Response:
    registry = await _registry(request)
    user_id = request.match_info["user_id"]
    if registry is None:
        return web.json_response({"user_id": user_id, "counts": {}})
    counts = await registry.count(user_id)
    await registry.erase(user_id)
    return web.json_response({"user_id": user_id, "counts": counts})
