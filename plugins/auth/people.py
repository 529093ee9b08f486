"""The people of a household, managed by the administrator (`/api/v1/admin/users`, docs/auth.md
"People"), and the two routes a person uses after: accepting an invitation and changing their
password. The routes live in the auth plugin because it owns the accounts; the administrator's
other routes are the admin plugin's."""
from __future__ import annotations

import logging
import secrets
import time
from typing import Any

import marshmallow
from aiohttp import web
from marshmallow import fields, validate, validates_schema

from gateway.errors import BadRequest, Conflict, Forbidden, NotFound
from gateway.identity import ADMIN_USER_ID, require_admin, require_user
from gateway.openapi import api_doc
from gateway.clock import rfc3339
from gateway.validation import parse_body, parse_query

from . import store
from .accounts import USER_ID_PREFIX, Accounts, _Lenient, _username_field, accounts_of, needs_database
from .schemas import DeletedPerson, InvitationAccepted, PasswordChanged, PersonCreated, PersonList, PersonWithCounts

log = logging.getLogger("plugins.auth")

routes = web.RouteTableDef()

PREFIX = "/api/v1/admin/users"
ONE_TIME_PASSWORD_BYTES = 9   # 12 characters of URL-safe base64: easy to read out, hard to guess
INVITATION_BYTES = 24


# ---------------------------------------------------------------- schemas of the requests

class CreatePerson(_Lenient):
    username = _username_field()
    nickname = fields.String(load_default=None, validate=validate.Length(min=1, max=32))
    email = fields.String(load_default="", validate=validate.Length(max=254))
    is_admin = fields.Boolean(load_default=False)
    invite = fields.Boolean(load_default=False, metadata={
        "description": "true: answer an invitation link instead of a one-time password."})


class ChangePerson(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.RAISE

    disabled = fields.Boolean(metadata={"description": "true ends the person's sessions, tokens and API keys."})
    is_admin = fields.Boolean(metadata={"description": "Needs [plugins.auth] people_may_be_admins."})
    reset_password = fields.String(validate=validate.OneOf(["one_time_password", "invitation"]), metadata={
        "description": "Give a new one-time password, or an invitation link to choose one; ends the "
                       "person's sessions."})
    nickname = fields.String(validate=validate.Length(min=1, max=32))

    @validates_schema
    def not_empty(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data:
            raise marshmallow.ValidationError("Name at least one change.", "_schema")


class DeleteQuery(marshmallow.Schema):
    confirm = fields.Boolean(load_default=False, metadata={
        "description": "true deletes; without it the answer is 409 with what would go (`counts`)."})


class AcceptInvitation(_Lenient):
    code = fields.String(required=True, validate=validate.Length(min=1, max=128))
    password = fields.String(required=True, validate=validate.Length(min=6, max=64))


class ChangePassword(_Lenient):
    current_password = fields.String(required=True, validate=validate.Length(min=1, max=1024))
    new_password = fields.String(required=True, validate=validate.Length(min=6, max=64))


USER_ID_PATH = {"user_id": {"type": "string", "pattern": r"^user_[A-Za-z0-9_]{3,32}$"}}


# ---------------------------------------------------------------- helpers

def person_json(row: dict) -> dict:
    return {"user_id": USER_ID_PREFIX + row["username"], "username": row["username"], "nickname": row["nickname"],
            "email": row["email"], "is_admin": bool(row["is_admin"]), "disabled": row["disabled_at"] is not None,
            "disabled_at": rfc3339(row["disabled_at"], "seconds"), "created_at": rfc3339(row["created_at"], "seconds"),
            "password_change_required": bool(row["password_change_required"]),
            "invited": not row["password_hash"]}


def username_of(user_id: str) -> str:
    if not user_id.startswith(USER_ID_PREFIX) or len(user_id) <= len(USER_ID_PREFIX):
        if user_id == ADMIN_USER_ID:
            raise Forbidden("The administrator's account comes from the configuration.",
                            error_type="admin_account", hint="Change ADMIN_USERNAME / ADMIN_PASSWORD instead.")
        raise NotFound("No such person.", error_type="user_not_found", hint="GET /api/v1/admin/users lists them.")
    return user_id[len(USER_ID_PREFIX):]


async def person_row(accounts: Accounts, user_id: str) -> dict:
    row = await store.find_user(accounts.context.db, username_of(user_id))
    if row is None or USER_ID_PREFIX + row["username"] != user_id:
        raise NotFound("No such person.", error_type="user_not_found", hint="GET /api/v1/admin/users lists them.")
    return row


def one_time_password() -> str:
    return secrets.token_urlsafe(ONE_TIME_PASSWORD_BYTES)


async def new_invitation(request: web.Request, accounts: Accounts, user_id: str) -> dict:
    code = secrets.token_urlsafe(INVITATION_BYTES)
    expires = time.time() + accounts.invitation_hours * 3600
    await store.drop_invitations(accounts.context.db, user_id)
    await store.create_invitation(accounts.context.db, code, user_id, expires)
    base = accounts.config.settings.core.public_base_url.rstrip("/")
    return {"invitation_code": code, "invitation_url": f"{base}/?invitation={code}" if base else None,
            "invitation_expires": int(expires)}


async def end_sessions(accounts: Accounts, user_id: str) -> None:
    """Every login and API key of the person ends, on every instance (their access tokens are
    ended by the new token generation the caller stored)."""
    await store.revoke_user(accounts.context.db, user_id)
    await store.revoke_user_api_keys(accounts.context.db, user_id)
    await accounts.standings.changed(user_id, ended=True)


# ---------------------------------------------------------------- the administrator's routes

@routes.get(PREFIX, name="admin.users")
@api_doc("The people of this household (the administrator from the configuration is not listed)",
         responses={200: PersonList}, errors=(503,), auth="admin", tags=("admin",))
@needs_database("Listing people")
async def list_people(request: web.Request) -> web.Response:
    await require_admin(request)
    rows = await store.list_users(accounts_of(request).context.db)
    people = [person_json(row) for row in rows]
    return web.json_response({"users": people, "total": len(people)})


@routes.post(PREFIX, name="admin.users_create")
@api_doc("Add a person, with a one-time password or an invitation link (shown once)", body=CreatePerson,
         responses={201: PersonCreated}, errors=(409, 503), auth="admin", tags=("admin",))
@needs_database("Adding a person")
async def create_person(request: web.Request) -> web.Response:
    await require_admin(request)
    accounts = accounts_of(request)
    body = await parse_body(request, CreatePerson())
    if body["is_admin"] and not accounts.people_may_be_admins:
        raise admins_refused()
    if body["username"].lower() == accounts.admin_username.lower():
        raise Conflict("This username is already taken.", error_type="username_taken",
                       hint="Choose another username.")
    password = None if body["invite"] else one_time_password()
    password_hash = await accounts.hasher.hash(password) if password else ""
    row = await store.create_user(accounts.context.db, body["username"], body["email"],
                                  body["nickname"] or body["username"], password_hash,
                                  is_admin=body["is_admin"], password_change_required=bool(password))
    # Someone new under a deleted person's name: instances that kept "deleted" must read again.
    await accounts.standings.changed(USER_ID_PREFIX + row["username"], ended=False)
    answer = {**person_json(row), "one_time_password": password, "invitation_code": None,
              "invitation_url": None, "invitation_expires": None}
    if body["invite"]:
        answer.update(await new_invitation(request, accounts, answer["user_id"]))
    return web.json_response(answer, status=201)


def admins_refused() -> Forbidden:
    return Forbidden("This deployment has one administrator, from its configuration.",
                     error_type="admins_not_allowed",
                     hint="The operator allows more with [plugins.auth] people_may_be_admins = true.")


@routes.get(PREFIX + "/{user_id}", name="admin.users_one")
@api_doc("One person, with the counts of what deleting them would remove", responses={200: PersonWithCounts},
         errors=(404, 503), auth="admin", tags=("admin",), path=USER_ID_PATH)
@needs_database("Reading a person")
async def one_person(request: web.Request) -> web.Response:
    await require_admin(request)
    accounts = accounts_of(request)
    user_id = request.match_info["user_id"]
    row = await person_row(accounts, user_id)
    return web.json_response({**person_json(row), "counts": await counts_of(accounts, user_id)})


async def counts_of(accounts: Accounts, user_id: str) -> dict[str, int]:
    return {**await store.count_own_rows(accounts.context.db, user_id), **await accounts.person_data.count(user_id)}


@routes.patch(PREFIX + "/{user_id}", name="admin.users_change")
@api_doc("Disable or enable a person, reset their password, make or unmake an administrator, rename",
         body=ChangePerson, responses={200: PersonCreated}, errors=(404, 503), auth="admin", tags=("admin",),
         path=USER_ID_PATH)
@needs_database("Changing a person")
async def change_person(request: web.Request) -> web.Response:
    await require_admin(request)
    accounts = accounts_of(request)
    user_id = request.match_info["user_id"]
    body = await parse_body(request, ChangePerson())
    row = await person_row(accounts, user_id)
    if "is_admin" in body and body["is_admin"] != row["is_admin"] and not accounts.people_may_be_admins:
        raise admins_refused()
    password = None
    password_hash = None
    reset = body.get("reset_password")
    if reset == "one_time_password":
        password = one_time_password()
        password_hash = await accounts.hasher.hash(password)
    elif reset == "invitation":
        password_hash = ""
    disabling = body.get("disabled") is True and row["disabled_at"] is None
    rights_changed = "is_admin" in body and body["is_admin"] != row["is_admin"]
    ending = disabling or reset is not None
    changed = await store.update_user(
        accounts.context.db, row["username"], disabled=body.get("disabled"), is_admin=body.get("is_admin"),
        password_hash=password_hash, password_change_required=(True if password else None) if reset else None,
        nickname=body.get("nickname"), new_generation=ending or rights_changed)
    if changed is None:
        raise NotFound("No such person.", error_type="user_not_found")
    if ending:
        await end_sessions(accounts, user_id)
    elif rights_changed or "disabled" in body:
        # The person's tokens carry their old rights: renewing gives new ones (no sign-out).
        await accounts.standings.changed(user_id, ended=False)
    answer = {**person_json(changed), "one_time_password": password, "invitation_code": None,
              "invitation_url": None, "invitation_expires": None}
    if reset == "invitation":
        answer.update(await new_invitation(request, accounts, user_id))
    return web.json_response(answer)


@routes.delete(PREFIX + "/{user_id}", name="admin.users_delete")
@api_doc("Delete a person with all of their data: without confirm=true, 409 with the counts of what would go",
         query=DeleteQuery, responses={200: DeletedPerson}, errors=(404, 409, 503), auth="admin",
         tags=("admin",), path=USER_ID_PATH)
@needs_database("Deleting a person")
async def delete_person(request: web.Request) -> web.Response:
    await require_admin(request)
    accounts = accounts_of(request)
    user_id = request.match_info["user_id"]
    confirm = parse_query(request, DeleteQuery())["confirm"]
    row = await person_row(accounts, user_id)
    counts = await counts_of(accounts, user_id)
    if not confirm:
        raise Conflict(f"Deleting {row['username']} deletes all of their data; confirm to go on.",
                       error_type="confirmation_required",
                       hint=f"Send DELETE {PREFIX}/{user_id}?confirm=true.", extra={"counts": counts})
    # Disabled first: nothing new arrives while the plugins delete, and a failure leaves the
    # person disabled rather than half deleted.
    await store.update_user(accounts.context.db, row["username"], disabled=True, new_generation=True)
    await end_sessions(accounts, user_id)
    await accounts.person_data.erase(user_id)
    await store.delete_user(accounts.context.db, row["username"])
    await accounts.standings.changed(user_id, ended=True)
    log.info("person %s deleted with their data: %s", user_id, counts)
    return web.json_response({"deleted": user_id, "counts": counts})


# ---------------------------------------------------------------- the person's own routes

@routes.post("/api/v1/auth/invitation", name="auth.invitation")
@api_doc("Accept an invitation: choose a password and sign in", body=AcceptInvitation,
         responses={200: InvitationAccepted}, errors=(400, 429, 503), auth="none")
@needs_database("Accepting an invitation")
async def accept_invitation(request: web.Request) -> web.Response:
    accounts = accounts_of(request)
    await accounts.limit_rate(accounts.client_of(request), "invitation")
    body = await parse_body(request, AcceptInvitation())
    user_id = await store.take_invitation(accounts.context.db, body["code"])
    row = None
    if user_id is not None:
        row = await store.find_user(accounts.context.db, user_id[len(USER_ID_PREFIX):])
    if row is None or row["disabled_at"] is not None:
        raise BadRequest("The invitation is not valid: unknown, used or expired.", error_type="invalid_invitation",
                         hint="Ask the administrator for a new one.")
    password_hash = await accounts.hasher.hash(body["password"])
    accepted = await store.update_user(accounts.context.db, row["username"], password_hash=password_hash,
                                       password_change_required=False)
    assert accepted is not None
    identity, generation = accounts.person_identity(accepted)
    pair = await accounts.issue_pair(identity, generation=generation)
    return web.json_response({"user_id": identity.user_id, "nickname": identity.nickname, **pair})


@routes.post("/api/v1/auth/password", name="auth.password")
@api_doc("Change one's own password (ends one's other logins)", body=ChangePassword,
         responses={200: PasswordChanged}, errors=(401, 403, 429, 503))
@needs_database("Changing the password")
async def change_password(request: web.Request) -> web.Response:
    identity = await require_user(request)
    accounts = accounts_of(request)
    if identity.scopes is not None:
        raise Forbidden("An API key cannot change the password.", error_type="api_key_not_allowed",
                        hint="Sign in with the password.")
    if identity.user_id == ADMIN_USER_ID or identity.kind != "user":
        raise Forbidden("The administrator's password comes from the configuration.", error_type="admin_account",
                        hint="Change ADMIN_PASSWORD.")
    await accounts.limit_rate(accounts.client_of(request), "password")
    body = await parse_body(request, ChangePassword())
    row = await person_row(accounts, identity.user_id)
    if not await accounts.hasher.check(body["current_password"], row["password_hash"] or None):
        raise Forbidden("The current password is wrong.", error_type="invalid_credentials",
                        hint="Type the password you signed in with.")
    password_hash = await accounts.hasher.hash(body["new_password"])
    changed = await store.update_user(accounts.context.db, row["username"], password_hash=password_hash,
                                      password_change_required=False, new_generation=True)
    assert changed is not None
    await store.revoke_user(accounts.context.db, identity.user_id)
    await accounts.standings.changed(identity.user_id, ended=False)
    person, generation = accounts.person_identity(changed)
    pair = await accounts.issue_pair(person, generation=generation)
    return web.json_response({"status": "password_changed", "user_id": person.user_id, **pair})

