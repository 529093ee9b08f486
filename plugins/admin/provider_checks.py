"""Reaching a provider for real (`/api/v1/admin/models/health-check`, `/fetch-models/{name}`):
a reachability check and a provider's model list, read in the OpenAI or the Ollama form."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.errors import BadGateway, BadRequest, NotFound
from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query

from .common import KEY_PARAMETER, PREFIX, FetchModelsQuery, HealthCheckBody, ai_core_of, path_key
from .schemas import HealthCheck, ProviderModels

routes = web.RouteTableDef()


# ---------------------------------------------------------------- helpers for provider answers

def provider_error_text(body: Any) -> str | None:
    """The message an OpenAI-compatible provider put in its error body."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error.get("type") or "") or None
        if error:
            return str(error)
        if body.get("message"):
            return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return None


def model_items(body: Any) -> list[dict] | None:
    """A provider's model list in one shape, from the OpenAI form (`data`), the Ollama form
    (`models`) or a bare list; None when the answer is none of these."""
    if isinstance(body, dict):
        entries = body.get("data") if isinstance(body.get("data"), list) else body.get("models")
    else:
        entries = body
    if not isinstance(entries, list):
        return None
    items = []
    for entry in entries:
        if isinstance(entry, str):
            entry = {"id": entry}
        if not isinstance(entry, dict):
            continue
        model_id = entry.get("id") or entry.get("name") or entry.get("model")
        if not model_id:
            continue
        created = entry.get("created")
        items.append({"id": str(model_id), "owned_by": entry.get("owned_by"),
                      "created": created if isinstance(created, int) else None})
    return items


@dataclass(frozen=True)
class ProviderTimeouts:
    """Seconds a request to a provider may take (`[plugins.admin]`)."""
    health_check: float
    fetch_models: float


TIMEOUTS = web.AppKey("admin.timeouts", ProviderTimeouts)


# ---------------------------------------------------------------- reaching a provider

@routes.post(PREFIX + "/models/health-check", name="admin.health_check")
@api_doc("Reach a provider for real: its model list, or a one-token completion", body=HealthCheckBody,
         responses={200: HealthCheck}, errors=(404, 502, 503), auth="admin")
async def health_check(request: web.Request) -> web.Response:
    """Reach the provider for real: its model list, or when it has none, a one-token
    completion with one of its models. Reports what happened; never fails the request
    because the provider did."""
    await require_admin(request)
    ai_core = ai_core_of(request)
    timeout = request.config_dict[TIMEOUTS].health_check
    body = await parse_body(request, HealthCheckBody())
    name = body["provider"]
    provider = next((p for p in await ai_core.providers() if p["name"] == name), None)
    if provider is None:
        raise NotFound(f"No provider named {name!r}.", error_type="provider_not_found",
                       hint="GET /api/v1/admin/models/providers lists the providers.")
    probe = await ai_core.probe(name, timeout=timeout)
    method, models_count = "models", None
    if probe["status"] in (404, 405):
        model = next((m for m in await ai_core.models() if m["provider"] == name and m["enabled"]), None)
        if model is not None:
            method = "completion"
            probe = await ai_core.probe(
                name, url=provider["base_url"].rstrip("/") + "/chat/completions", method="POST",
                payload={"model": model["name"], "max_tokens": 1, "stream": False,
                         "messages": [{"role": "user", "content": "ping"}]},
                timeout=timeout)
    status = probe["status"]
    reachable = status is not None
    ok = reachable and 200 <= status < 300
    error = probe["error"]
    if reachable and not ok:
        error = f"HTTP {status}: {provider_error_text(probe['body']) or 'no message'}"
    if ok and method == "models":
        items = model_items(probe["body"])
        models_count = len(items) if items is not None else None
    latency = probe["latency_ms"]
    if ok:
        what = "its model list" if method == "models" else "a one-token completion"
        count = f" ({models_count} models)" if models_count is not None else ""
        message = f"Provider {name!r} answered {what} in {latency:g} ms{count}."
    elif reachable:
        message = f"Provider {name!r} is reachable but answered with an error: {error}."
    else:
        message = f"Provider {name!r} cannot be reached: {error}."
    return web.json_response({"provider": name, "message": message, "reachable": reachable, "ok": ok,
                              "status": status, "latency_ms": latency, "method": method,
                              "models_count": models_count, "error": None if ok else error,
                              "error_kind": probe["error_kind"], "url": probe["url"]})


@routes.get(PREFIX + "/models/fetch-models/{name}", name="admin.fetch_models")
@api_doc("A provider's model list, from its saved address or `url`", query=FetchModelsQuery,
         responses={200: ProviderModels}, errors=(404, 502, 503), auth="admin", path={"name": KEY_PARAMETER})
async def fetch_models(request: web.Request) -> web.Response:
    """The provider's model list at `url` (default: the saved provider's `/models`). The URL
    is the caller's, so the AI core fetches it through the guarded fetcher and sends the
    saved key only to the provider's own origin."""
    await require_admin(request)
    name = path_key(request, "name", "provider name")
    query = parse_query(request, FetchModelsQuery())
    probe = await ai_core_of(request).probe(name, url=query["url"],
                                            timeout=request.config_dict[TIMEOUTS].fetch_models)
    if probe["error_kind"] == "refused":
        raise BadRequest(f"The URL is not allowed: {probe['error']}.", error_type="url_not_allowed",
                         hint="Use the provider's public address, or have the operator allow private "
                              "addresses ([fetch] allow_private / allow_hosts).")
    if probe["status"] is None:
        raise BadGateway(f"The provider cannot be reached: {probe['error']}.", error_type="provider_unreachable")
    if not 200 <= probe["status"] < 300:
        raise BadGateway(f"The provider answered HTTP {probe['status']}: "
                         f"{provider_error_text(probe['body']) or 'no message'}.", error_type="provider_error",
                         hint="Check the URL and the provider's API key.")
    items = model_items(probe["body"])
    if items is None:
        raise BadGateway("The provider's answer is not a model list.", error_type="provider_bad_answer",
                         hint="Point url at the provider's /models (OpenAI) or /api/tags (Ollama) address.")
    return web.json_response({"provider": name, "url": probe["url"], "models": items, "total": len(items)})
