"""The profile (`/api/v1/profile`): who the caller (or, for the administrator and services,
anyone) is, and their time zone, which they may change."""
from __future__ import annotations

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.clock import rfc3339
from gateway.database import unavailable as database_unavailable
from gateway.errors import BadRequest, NotFound, ServiceUnavailable
from gateway.identity import ADMIN_USER_ID, Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query

from . import store
from .accounts import DATABASE_ERRORS, PERSON_ZONES_KEY, USER_ID_PREFIX, accounts_of, log
from .schemas import Profile
from .tokens import PASSWORD_CHANGE_PENDING
from .zones import valid_zone

routes = web.RouteTableDef()


class ProfileQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "Administrator and services: whose profile (default: the caller's)."})


class ProfileUpdate(marshmallow.Schema):
    timezone = fields.String(required=True, validate=validate.Length(min=1, max=64), metadata={
        "description": "IANA time zone name, e.g. \"Asia/Shanghai\"; what reminders and rules read "
                       "\"tomorrow at 9\" in."})


@routes.get("/api/v1/profile", name="auth.profile")
@api_doc("The caller's profile (the administrator and services: anyone's, with user_id)", query=ProfileQuery,
         responses={200: Profile}, errors=(403, 404))
async def profile(request: web.Request) -> web.Response:
    identity = await require_user(request)
    target = owner_for(identity, parse_query(request, ProfileQuery())["user_id"])
    return web.json_response(await _profile_of(request, identity, target))


@routes.put("/api/v1/profile", name="auth.profile_update")
@api_doc("Change the caller's preferences: their time zone (the administrator: anyone's, with ?user_id=)",
         query=ProfileQuery, body=ProfileUpdate, responses={200: Profile}, errors=(403, 404, 503))
async def update_profile(request: web.Request) -> web.Response:
    identity = await require_user(request)
    target = owner_for(identity, parse_query(request, ProfileQuery())["user_id"])
    zone = (await parse_body(request, ProfileUpdate()))["timezone"]
    if not valid_zone(zone):
        raise BadRequest(f"{zone!r} is not a known time zone.", error_type="validation_error",
                         hint="Use an IANA name such as \"Europe/Berlin\", \"America/New_York\" or \"Asia/Shanghai\".")
    answer = await _profile_of(request, identity, target)  # 404 for nobody, before anything is stored
    try:
        await request.config_dict[PERSON_ZONES_KEY].set_zone(target, zone)
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        raise ServiceUnavailable("Saving the time zone needs the database, which is unavailable.",
                                 error_type="database_unavailable", hint="Try again shortly.") from None
    return web.json_response({**answer, "timezone": zone, "timezone_chosen": True})


async def _profile_of(request: web.Request, caller: Identity, user_id: str) -> dict:
    """The spec's profile of `user_id`, with their time zone. Without the database it still
    answers from what is known (created_at null, the default zone)."""
    accounts = accounts_of(request)
    zones = request.config_dict[PERSON_ZONES_KEY]
    try:
        chosen = await zones.chosen_zone(user_id)
    except DATABASE_ERRORS as error:
        if not database_unavailable(error):
            raise
        chosen = None
    # A client may set the person's zone from the device once when none was chosen (the web
    # client does, on sign-in), never overriding a choice.
    zone, zone_fields = chosen or zones.default_zone, {"timezone_chosen": chosen is not None}
    if user_id == caller.user_id and caller.kind == "service":
        return {"user_id": caller.user_id, "username": caller.username,
                "nickname": caller.nickname or caller.username, "is_admin": caller.is_admin,
                "created_at": None, "timezone": zone, "password_change_required": False, **zone_fields}
    if user_id == ADMIN_USER_ID:
        admin = accounts.admin_identity()
        try:
            created_at = await store.installed_at(accounts.context.db)
        except DATABASE_ERRORS as error:
            if not database_unavailable(error):
                raise
            log.warning("profile without a database: %s", error)
            created_at = None
        return {"user_id": admin.user_id, "username": admin.username, "nickname": admin.nickname,
                "is_admin": True, "created_at": rfc3339(created_at, "seconds"), "timezone": zone,
                "password_change_required": False, **zone_fields}
    username = user_id[len(USER_ID_PREFIX):] if user_id.startswith(USER_ID_PREFIX) else ""
    try:
        row = await store.find_user(accounts.context.db, username) if username else None
    except DATABASE_ERRORS as error:
        if not database_unavailable(error) or user_id != caller.user_id:
            raise
        # The spec: the profile still answers, from the token, with created_at null.
        log.warning("profile without a database: %s", error)
        return {"user_id": caller.user_id, "username": caller.username, "nickname": caller.nickname,
                "is_admin": False, "created_at": None, "timezone": zone,
                "password_change_required": bool(request.get(PASSWORD_CHANGE_PENDING)), **zone_fields}
    if row is None or USER_ID_PREFIX + row["username"] != user_id:
        raise NotFound("The user does not exist.", error_type="user_not_found",
                       hint="The account may have been deleted; log in again.")
    return {"user_id": user_id, "username": row["username"], "nickname": row["nickname"], "is_admin": False,
            "created_at": rfc3339(row["created_at"], "seconds"), "timezone": zone,
            "password_change_required": bool(row["password_change_required"]), **zone_fields}
