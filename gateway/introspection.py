"""What a service really loaded, for the plugin manager: `GET /api/v1/introspection` (the
service credential only). Built from what the registrar recorded for each plugin, so the core
names no feature; a plugin that keeps things for others (the AI core's tools) adds a section
with `registrar.report`."""
from __future__ import annotations

import hmac
import logging

import marshmallow
from aiohttp import web
from marshmallow import fields

from .context import CONTEXT, Context
from .database import fetch_all
from .errors import Unauthorized
from .openapi import api_doc
from .plugin_settings import PluginSettings
from .plugins import REGISTRY, Registry

log = logging.getLogger("gateway.introspection")

INTROSPECTION_PATH = "/api/v1/introspection"


class RouteOut(marshmallow.Schema):
    method = fields.String(required=True)
    path = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "The route's name, \"\" when unnamed."})


class LoadedPlugin(marshmallow.Schema):
    name = fields.String(required=True)
    distribution = fields.String(required=True, metadata={"description": "\"\" for a plugin passed inline."})
    version = fields.String(required=True)
    description = fields.String(required=True)
    depends = fields.List(fields.String(), required=True)
    routes = fields.List(fields.Nested(RouteOut), required=True)
    ws_types = fields.List(fields.String(), required=True, metadata={
        "description": "WebSocket message types it handles."})
    ws_server_types = fields.List(fields.String(), required=True, metadata={
        "description": "WebSocket message types it sends."})
    jobs = fields.List(fields.String(), required=True)
    provides = fields.List(fields.String(), required=True, metadata={"description": "Contract keys."})
    migrations = fields.List(fields.String(), required=True, metadata={
        "description": "Its migrations recorded as applied (`NNN_name`)."})
    settings_section = fields.String(required=True, metadata={"description": "`plugins.<name>`"})
    settings_keys = fields.List(fields.String(), required=True, metadata={
        "description": "The keys its settings schema declares (values are not shown: some are secrets)."})
    reported = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True, metadata={
        "description": "Sections other plugins keep for it, e.g. `tools`: the AI tools it added."})


class SkippedPlugin(marshmallow.Schema):
    name = fields.String(required=True)
    reason = fields.String(required=True)


class Introspection(marshmallow.Schema):
    service = fields.String(required=True)
    name = fields.String(required=True)
    plugins = fields.List(fields.Nested(LoadedPlugin), required=True, metadata={"description": "In setup order."})
    skipped = fields.List(fields.Nested(SkippedPlugin), required=True)
    migrations_error = fields.String(required=True, allow_none=True, metadata={
        "description": "Why the applied migrations could not be read, or null."})


def require_service_credential(request: web.Request) -> None:
    """The service credential (`SERVICE_TOKEN`) and nothing else: every service answers this,
    also one that loads no authentication plugin."""
    expected = request.config_dict[CONTEXT].config.settings.auth.service_token
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if not (expected and scheme.lower() == "bearer"
            and hmac.compare_digest(presented.strip().encode(), expected.encode())):
        raise Unauthorized("This endpoint answers only other services.", error_type="unauthorized",
                           hint="Send Authorization: Bearer <SERVICE_TOKEN>.")


async def applied_migrations(context: Context, names: list[str]) -> dict[str, list[str]]:
    rows = await fetch_all(context.db, "SELECT plugin, version, name FROM schema_migrations "
                           "WHERE plugin = ANY(%s) ORDER BY plugin, version", (names,))
    applied: dict[str, list[str]] = {}
    for row in rows:
        applied.setdefault(row["plugin"], []).append(f"{row['version']:03d}_{row['name']}")
    return applied


async def describe_service(app: web.Application) -> dict:
    """The introspection body of `app`'s service."""
    context, registry = app[CONTEXT], app[REGISTRY]
    with_migrations = sorted({m.plugin for m in registry.migrations})
    applied: dict[str, list[str]] = {}
    migrations_error = None
    if with_migrations:
        try:
            applied = await applied_migrations(context, with_migrations)
        except Exception as error:  # the database down: report what loaded, and why this part is missing
            migrations_error = f"{type(error).__name__}: {error}"
    return {"service": context.service_id, "name": context.service_name,
            "plugins": describe_plugins(registry, applied),
            "skipped": [{"name": name, "reason": reason} for name, reason in registry.skipped.items()],
            "migrations_error": migrations_error}


def describe_plugins(registry: Registry, applied: dict[str, list[str]]) -> list[dict]:
    reported: dict[str, dict[str, list[str]]] = {}
    for section, reporter, report in registry.reports:
        try:
            for owner, items in report().items():
                reported.setdefault(owner, {})[section] = sorted(items)
        except Exception:  # one plugin's broken report must not hide the rest
            log.exception("the introspection section %r of %s failed", section, reporter)
    server_types: dict[str, list[str]] = {}
    for message in registry.ws_server_types.values():
        server_types.setdefault(message.plugin, []).append(message.type)
    described = []
    for name, record in registry.records.items():
        plugin = record.plugin
        described.append({
            "name": name, "distribution": plugin.distribution, "version": plugin.version,
            "description": plugin.description, "depends": list(plugin.depends),
            "routes": [{"method": method, "path": path, "name": route_name}
                       for method, path, route_name in record.routes],
            "ws_types": list(record.ws_types), "ws_server_types": server_types.get(name, []),
            "jobs": list(record.jobs), "provides": list(record.provides),
            "migrations": applied.get(name, []), "settings_section": f"plugins.{name}",
            "settings_keys": sorted((plugin.settings_class or PluginSettings).schema().fields),
            "reported": reported.get(name, {})})
    return described


@api_doc("What this service loaded: its plugins with their routes, WebSocket types, jobs, contracts, "
         "migrations and reported sections, and the plugins it skipped", responses={200: Introspection},
         auth="peer")
async def introspection(request: web.Request) -> web.Response:
    require_service_credential(request)
    return web.json_response(await describe_service(request.app))
