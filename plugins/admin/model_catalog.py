"""Model providers, models and routing rules (`/api/v1/admin/models/providers|models|routing`):
validated here, kept by the AI core."""
from __future__ import annotations

from aiohttp import web

from gateway.errors import BadRequest, Conflict
from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.validation import parse_body

from .common import (KEY_PARAMETER, PREFIX, ModelBody, ProviderBody, RouteBody, ai_core_of, path_key,
                     same_as_path)
from .schemas import ModelChanged, Models, ProviderChanged, Providers, RouteChanged, RoutingRule

routes = web.RouteTableDef()


def mask_key(api_key: str | None) -> str:
    """Enough of a key to recognise it, never enough to use it (the AI core masks already;
    this holds even if a future AI core forgot)."""
    if not api_key:
        return ""
    if api_key.startswith("****"):
        return api_key
    return "****" + api_key[-4:] if len(api_key) > 8 else "****"


# ---------------------------------------------------------------- providers

@routes.get(PREFIX + "/models/providers", name="admin.providers")
@api_doc("Model providers (keys masked)", responses={200: Providers}, errors=(502, 503), auth="admin")
async def providers(request: web.Request) -> web.Response:
    await require_admin(request)
    items = [{"name": p["name"], "base_url": p["base_url"], "api_key": mask_key(p.get("api_key")),
              "has_api_key": bool(p.get("api_key"))} for p in await ai_core_of(request).providers()]
    return web.json_response({"providers": items, "total": len(items)})


@routes.post(PREFIX + "/models/providers/{name}", name="admin.provider_save")
@api_doc("Add or change a provider (api_key left out: the stored key stays)", body=ProviderBody,
         responses={200: ProviderChanged}, errors=(502, 503), auth="admin", path={"name": KEY_PARAMETER})
async def provider_save(request: web.Request) -> web.Response:
    await require_admin(request)
    name = path_key(request, "name", "provider name")
    body = await parse_body(request, ProviderBody())
    same_as_path(name, body["name"], "name")
    # api_key left out (None): the stored key stays
    await ai_core_of(request).save_provider(name, body["base_url"].rstrip("/"), body["api_key"])
    return web.json_response({"status": "saved", "name": name})


@routes.delete(PREFIX + "/models/providers/{name}", name="admin.provider_delete")
@api_doc("Delete a provider no model uses", responses={200: ProviderChanged}, errors=(404, 409, 502, 503),
         auth="admin", path={"name": KEY_PARAMETER})
async def provider_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    name = path_key(request, "name", "provider name")
    users = [m["id"] for m in await ai_core.models() if m["provider"] == name]
    if users:
        raise Conflict(f"The provider {name!r} still serves the models {', '.join(users)}.",
                       error_type="provider_in_use", hint="Delete those models or move them to another provider.")
    await ai_core.delete_provider(name)
    return web.json_response({"status": "deleted", "name": name})


# ---------------------------------------------------------------- models

@routes.get(PREFIX + "/models/models", name="admin.models")
@api_doc("Models", responses={200: Models}, errors=(502, 503), auth="admin")
async def models(request: web.Request) -> web.Response:
    await require_admin(request)
    listed = await ai_core_of(request).models()
    return web.json_response({"models": listed, "total": len(listed)})


@routes.post(PREFIX + "/models/models/{id}", name="admin.model_save")
@api_doc("Add or change a model of a saved provider", body=ModelBody, responses={200: ModelChanged},
         errors=(502, 503), auth="admin", path={"id": KEY_PARAMETER})
async def model_save(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    model_id = path_key(request, "id", "model id")
    body = await parse_body(request, ModelBody())
    same_as_path(model_id, body.pop("id"), "id")
    body.pop("updated_at")
    if body["provider"] not in {p["name"] for p in await ai_core.providers()}:
        raise BadRequest(f"Invalid body: provider: no provider named {body['provider']!r}.",
                         error_type="validation_error",
                         hint="Save the provider first (POST /api/v1/admin/models/providers/<name>).",
                         extra={"fields": {"provider": ["unknown provider"]}})
    await ai_core.save_model(model_id, body)
    return web.json_response({"status": "saved", "id": model_id})


@routes.delete(PREFIX + "/models/models/{id}", name="admin.model_delete")
@api_doc("Delete a model no routing rule names", responses={200: ModelChanged}, errors=(404, 409, 502, 503),
         auth="admin", path={"id": KEY_PARAMETER})
async def model_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    model_id = path_key(request, "id", "model id")
    purposes = [r["purpose"] for r in await ai_core.routes() if model_id in r["fallback_chain"]]
    if purposes:
        raise Conflict(f"The model {model_id!r} is in the fallback chain of {', '.join(purposes)}.",
                       error_type="model_in_use", hint="Take it out of those routing rules first.")
    await ai_core.delete_model(model_id)
    return web.json_response({"status": "deleted", "id": model_id})


# ---------------------------------------------------------------- routing

@routes.get(PREFIX + "/models/routing", name="admin.routing")
@api_doc("Routing rules: the fallback chain of models per purpose", responses={200: RoutingRule(many=True)},
         errors=(502, 503), auth="admin")
async def routing(request: web.Request) -> web.Response:
    await require_admin(request)
    return web.json_response(await ai_core_of(request).routes())


@routes.post(PREFIX + "/models/routing/{purpose}", name="admin.routing_save")
@api_doc("Set a purpose's fallback chain of saved models", body=RouteBody, responses={200: RouteChanged},
         errors=(502, 503), auth="admin", path={"purpose": KEY_PARAMETER})
async def routing_save(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    purpose = path_key(request, "purpose", "purpose")
    body = await parse_body(request, RouteBody())
    same_as_path(purpose, body["purpose"], "purpose")
    chain = body["fallback_chain"]
    repeated = sorted({m for m in chain if chain.count(m) > 1})
    if repeated:
        raise BadRequest(f"Invalid body: fallback_chain: {', '.join(repeated)} appears more than once.",
                         error_type="validation_error", hint="Name each model once.",
                         extra={"fields": {"fallback_chain": ["repeated model"]}})
    known = {m["id"] for m in await ai_core.models()}
    unknown = [m for m in chain if m not in known]
    if unknown:
        raise BadRequest(f"Invalid body: fallback_chain: no model with id {', '.join(map(repr, unknown))}.",
                         error_type="validation_error",
                         hint="GET /api/v1/admin/models/models lists the model ids.",
                         extra={"fields": {"fallback_chain": ["unknown model"]}})
    await ai_core.save_route(purpose, chain, body["required"])
    return web.json_response({"status": "saved", "purpose": purpose})


@routes.delete(PREFIX + "/models/routing/{purpose}", name="admin.routing_delete")
@api_doc("Delete a routing rule", responses={200: RouteChanged}, errors=(404, 502, 503), auth="admin",
         path={"purpose": KEY_PARAMETER})
async def routing_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    purpose = path_key(request, "purpose", "purpose")
    await ai_core_of(request).delete_route(purpose)
    return web.json_response({"status": "deleted", "purpose": purpose})
