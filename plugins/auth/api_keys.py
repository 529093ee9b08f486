"""Personal API keys (`/api/v1/auth/api-keys`, docs/auth.md "Personal API keys"): a person
creates named keys for scripts and other programs, each shown once and kept hashed, with an
optional expiry and scopes; the administrator (and the console) lists every key and revokes any.
Checking a key on each request is standing.py's."""
from __future__ import annotations

import secrets
import uuid
from datetime import datetime, timedelta, timezone

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.errors import BadRequest, Forbidden, NotFound
from gateway.identity import Identity, require_user
from gateway.openapi import api_doc
from gateway.clock import rfc3339
from gateway.validation import parse_body, parse_query

from . import store
from .accounts import _Lenient, accounts_of, needs_database
from .contract import SCOPES
from .schemas import ApiKey, ApiKeyCreated, ApiKeyList
from .standing import API_KEY_PREFIX

routes = web.RouteTableDef()

PREFIX = "/api/v1/auth/api-keys"
KEY_BYTES = 32
MAX_LIFETIME_DAYS = 3650
KEY_ID_PATH = {"key_id": {"type": "string", "pattern": r"^[0-9a-f]{16}$"}}


class CreateKey(_Lenient):
    name = fields.String(required=True, validate=validate.Length(min=1, max=64), metadata={
        "description": "What the key is for, e.g. \"home automation\"."})
    scopes = fields.List(fields.String(validate=validate.OneOf(SCOPES)), load_default=None,
                         validate=validate.Length(min=1, max=len(SCOPES)), metadata={
        "description": "What the key may do: `chat` (/ws/chat, the OpenAI door), `mcp` (/mcp), `read` "
                       "(REST GET), `write` (every REST call); default all four."})
    expires_in_days = fields.Integer(load_default=None, allow_none=True,
                                     validate=validate.Range(min=1, max=MAX_LIFETIME_DAYS), metadata={
        "description": "Days until the key stops working; none: it works until revoked."})


class KeysQuery(marshmallow.Schema):
    all = fields.Boolean(load_default=False, metadata={
        "description": "The administrator: every person's keys."})


def key_json(row: dict) -> dict:
    now = datetime.now(timezone.utc)
    expired = row["expires_at"] is not None and row["expires_at"] <= now
    return {"id": row["id"], "user_id": row["user_id"], "name": row["name"], "scopes": list(row["scopes"]),
            "created_at": rfc3339(row["created_at"], "seconds"), "expires_at": rfc3339(row["expires_at"], "seconds"),
            "last_used_at": rfc3339(row["last_used_at"], "seconds"), "revoked_at": rfc3339(row["revoked_at"], "seconds"),
            "active": row["revoked_at"] is None and not expired}


def new_key() -> tuple[str, str]:
    """A key id (public, shown in lists) and the key itself: `ak_<id>_<secret>`."""
    key_id = uuid.uuid4().hex[:16]
    return key_id, f"{API_KEY_PREFIX}{key_id}_{secrets.token_urlsafe(KEY_BYTES)}"


def person_only(identity: Identity) -> Identity:
    if identity.kind != "user":
        raise Forbidden("API keys belong to people.", error_type="forbidden",
                        hint="Call with a person's access token.")
    return identity


@routes.get(PREFIX, name="auth.api_keys")
@api_doc("The caller's API keys (the administrator with all=true: everyone's), with their last use",
         query=KeysQuery, responses={200: ApiKeyList}, errors=(403, 503))
@needs_database("Listing API keys")
async def list_keys(request: web.Request) -> web.Response:
    identity = person_only(await require_user(request))
    every = parse_query(request, KeysQuery())["all"]
    if every and not identity.is_admin:
        raise Forbidden("Only the administrator sees everyone's keys.", error_type="admin_only",
                        hint="Leave out all=true.")
    rows = await store.list_api_keys(accounts_of(request).context.db, None if every else identity.user_id)
    keys = [key_json(row) for row in rows]
    return web.json_response({"keys": keys, "total": len(keys)})


@routes.post(PREFIX, name="auth.api_keys_create")
@api_doc("Create an API key: the key is in this answer only", body=CreateKey, responses={201: ApiKeyCreated},
         errors=(403, 503))
@needs_database("Creating an API key")
async def create_key(request: web.Request) -> web.Response:
    identity = person_only(await require_user(request))
    if identity.scopes is not None:
        # A key that made keys could give itself scopes it was never granted.
        raise Forbidden("An API key cannot create API keys.", error_type="api_key_not_allowed",
                        hint="Sign in with your password to create keys.")
    body = await parse_body(request, CreateKey())
    scopes = sorted(set(body["scopes"] or SCOPES))
    if len(scopes) != len(body["scopes"] or SCOPES):
        raise BadRequest("Name each scope once.", error_type="validation_error", hint=f"Scopes: {', '.join(SCOPES)}.")
    expires_at = (datetime.now(timezone.utc) + timedelta(days=body["expires_in_days"])
                  if body["expires_in_days"] else None)
    key_id, key = new_key()
    row = await store.create_api_key(accounts_of(request).context.db, key_id, identity.user_id, body["name"],
                                     key, scopes, expires_at)
    return web.json_response({**key_json(row), "key": key}, status=201)


@routes.delete(PREFIX + "/{key_id}", name="auth.api_keys_revoke")
@api_doc("Revoke an API key (one's own; the administrator: anyone's); refused from the next request on",
         responses={200: ApiKey}, errors=(403, 404, 503), path=KEY_ID_PATH)
@needs_database("Revoking an API key")
async def revoke_key(request: web.Request) -> web.Response:
    identity = person_only(await require_user(request))
    row = await store.revoke_api_key(accounts_of(request).context.db, request.match_info["key_id"],
                                     None if identity.is_admin and identity.scopes is None else identity.user_id)
    if row is None:
        raise NotFound("No such API key.", error_type="api_key_not_found", hint=f"GET {PREFIX} lists yours.")
    return web.json_response(key_json(row))
