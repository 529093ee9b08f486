"""One request to a provider on the administrator's behalf (its model list, a one-token
completion), made here because the provider's key never leaves the AI core. The gateway's
admin plugin builds its health check and its model listing on this endpoint.

The URL goes through the core's guarded fetcher (`gateway.fetch`) under the egress policy for
model providers (`[fetch]` and `model_hosts`, as the chat calls: `providers.model_policy`), and
the stored key is attached only when the URL has the provider's own origin, so a caller-chosen
URL cannot carry the key elsewhere."""
from __future__ import annotations

import time
from urllib.parse import urlsplit

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.errors import NotFound
from gateway.fetch import FetchError, GuardedFetcher
from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.validation import parse_body

from . import store
from .api import engine_of
from .providers import model_policy
from .schemas import ProbeAnswer

routes = web.RouteTableDef()

BODY_PREVIEW_CHARS = 4000
PROBE_MAX_BYTES = 4 * 1024 * 1024


class ProbeBody(marshmallow.Schema):
    url = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=2000))
    method = fields.String(load_default="GET", validate=validate.OneOf(["GET", "POST"]))
    payload = fields.Dict(data_key="json", load_default=None, allow_none=True)
    timeout = fields.Float(load_default=10.0, validate=validate.Range(min=0.1, max=60))


def _origin(url: str) -> tuple[str, str, int] | None:
    """None for a URL that does not parse (the guarded fetcher refuses it)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme, (parts.hostname or "").lower(), port or (443 if parts.scheme == "https" else 80)


@routes.post("/api/v1/models/providers/{name}/probe", name="ai_core.provider_probe")
@api_doc("One request to a provider with its stored key (its model list by default)", body=ProbeBody,
         body_required=False, responses={200: ProbeAnswer}, errors=(404, 503), auth="admin")
async def provider_probe(request: web.Request) -> web.Response:
    await require_admin(request)
    name = request.match_info["name"]
    body = await parse_body(request, ProbeBody(), allow_empty=True)
    context = get_context(request)
    provider = next((p for p in await store.list_providers(context.db) if p.name == name), None)
    url = body["url"]
    if url is None:
        if provider is None:
            raise NotFound(f"No provider named {name!r}.", error_type="provider_not_found")
        url = provider.base_url.rstrip("/") + "/models"
    headers = {"Accept": "application/json"}
    # The key goes to the provider's own origin only.
    own_origin = provider is not None and _origin(url) is not None and _origin(url) == _origin(provider.base_url)
    api_key = provider.api_key if own_origin and provider is not None else ""
    key_sent = bool(api_key)
    if key_sent:
        headers["Authorization"] = f"Bearer {api_key}"
    policy = model_policy(context.config, engine_of(request).settings)
    fetcher = GuardedFetcher.for_context(context, policy=policy, timeout=body["timeout"],
                                         max_bytes=PROBE_MAX_BYTES)
    started = time.monotonic()
    answer = {"provider": name, "provider_known": provider is not None, "url": url, "key_sent": key_sent,
              "status": None, "error": None, "error_kind": None, "body": None}
    try:
        result = await fetcher.fetch(url, method=body["method"], headers=headers, json_body=body["payload"])
    except FetchError as error:
        answer.update(error=str(error), error_kind=error.kind)
    else:
        answer["status"] = result.status
        try:
            answer["body"] = result.json()
        except FetchError:
            answer["body"] = result.text()[:BODY_PREVIEW_CHARS]
    answer["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
    return web.json_response(answer)
