"""Registration (`/api/v1/auth/register`): an account of one's own, when the operator opens
registration and gives out its code."""
from __future__ import annotations

from aiohttp import web
from marshmallow import fields, validate

from gateway.errors import BadRequest, Conflict, Forbidden
from gateway.openapi import api_doc
from gateway.validation import parse_body

from . import store
from .accounts import _Lenient, _same, _username_field, accounts_of, needs_database
from .schemas import SignedIn

routes = web.RouteTableDef()


class RegisterSchema(_Lenient):
    username = _username_field()
    password = fields.String(required=True, validate=validate.Length(min=6, max=64))
    email = fields.String(required=True, validate=[
        validate.Length(min=3, max=254),
        validate.Regexp(r"^[^@\s]+@[^@\s]+\Z", error="Not an email address (it must contain @)."),
    ])
    nickname = fields.String(required=True, validate=validate.Length(min=1, max=32))
    verify_code = fields.String(required=True, validate=validate.Length(equal=6))


@routes.post("/api/v1/auth/register", name="auth.register")
@api_doc("Create an account (when REGISTRATION_ENABLED)", body=RegisterSchema, responses={201: SignedIn},
         errors=(403, 409, 429, 503), auth="none")
@needs_database("Registration")
async def register(request: web.Request) -> web.Response:
    accounts = accounts_of(request)
    await accounts.limit_rate(accounts.client_of(request), "register")
    if not accounts.config.settings.auth.registration_enabled:
        raise Forbidden("Registration is not open.", error_type="registration_closed",
                        hint="The operator enables it with REGISTRATION_ENABLED=true.")
    body = await parse_body(request, RegisterSchema())
    expected_code = accounts.config.settings.auth.registration_verify_code
    if not expected_code or not _same(body["verify_code"], expected_code):
        raise BadRequest("The verification code is wrong.", error_type="invalid_verify_code",
                         hint="Ask the operator for the registration code.")
    if body["username"].lower() == accounts.admin_username.lower():
        raise Conflict("This username is already taken.", error_type="username_taken",
                       hint="Choose another username.")
    password_hash = await accounts.hasher.hash(body["password"])
    row = await store.create_user(accounts.context.db, body["username"], body["email"],
                                  body["nickname"], password_hash)
    identity, generation = accounts.person_identity(row)
    pair = await accounts.issue_pair(identity, generation=generation)
    return web.json_response({"user_id": identity.user_id, "nickname": identity.nickname, **pair},
                             status=201)
