"""What the auth endpoints answer, for the OpenAPI document (spec: "Authentication and profile")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate


class TokenPair(marshmallow.Schema):
    token = fields.String(required=True, metadata={"description": "The access token (JWT)."})
    refresh_token = fields.String(required=True, metadata={"description": "Valid for 30 days, used once."})
    expires = fields.Integer(required=True, metadata={"description": "When the access token expires (Unix seconds)."})


class SignedIn(TokenPair):
    user_id = fields.String(required=True, metadata={"description": "`admin`, or `user_<username>`."})
    nickname = fields.String(required=True)
    password_change_required = fields.Boolean(metadata={
        "description": "Login: the password is a one-time password; change it with POST /api/v1/auth/password."})


class LoggedOut(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("logged_out"))
    revoked = fields.Integer(required=True, metadata={"description": "Refresh tokens revoked."})


class Profile(marshmallow.Schema):
    user_id = fields.String(required=True)
    username = fields.String(required=True)
    nickname = fields.String(required=True)
    is_admin = fields.Boolean(required=True)
    created_at = fields.String(required=True, allow_none=True,
                               metadata={"description": "RFC 3339; null when the database is unavailable."})
    timezone = fields.String(required=True, metadata={
        "description": "IANA time zone: the person's choice (PUT /api/v1/profile), else the deployment's default."})
    timezone_chosen = fields.Boolean(required=True, metadata={
        "description": "Whether the person chose `timezone` (PUT /api/v1/profile); false: the deployment's "
                       "default, which a client may replace once with the device's zone."})
    password_change_required = fields.Boolean(required=True, metadata={
        "description": "The person signed in with a one-time password and must choose their own (POST "
                       "/api/v1/auth/password) before anything else: until then their tokens open only that, "
                       "this profile, refresh and logout (403 `password_change_required` elsewhere)."})


# ---------------------------------------------------------------- people (the administrator's)

class Person(marshmallow.Schema):
    user_id = fields.String(required=True)
    username = fields.String(required=True)
    nickname = fields.String(required=True)
    email = fields.String(required=True)
    is_admin = fields.Boolean(required=True)
    disabled = fields.Boolean(required=True)
    disabled_at = fields.String(required=True, allow_none=True)
    created_at = fields.String(required=True, allow_none=True)
    password_change_required = fields.Boolean(required=True, metadata={
        "description": "The password is a one-time password the person has not changed yet."})
    invited = fields.Boolean(required=True, metadata={
        "description": "The person has no password yet: they choose it with their invitation."})


class PersonWithCounts(Person):
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True, metadata={
        "description": "What deleting the person would remove, by kind (sessions, messages, files, api_keys, ...)."})


class PersonList(marshmallow.Schema):
    users = fields.List(fields.Nested(Person), required=True)
    total = fields.Integer(required=True)


class PersonCreated(Person):
    one_time_password = fields.String(required=True, allow_none=True, metadata={
        "description": "Shown once: the person signs in with it and is asked to change it."})
    invitation_code = fields.String(required=True, allow_none=True, metadata={
        "description": "Shown once: the person chooses a password with it (POST /api/v1/auth/invitation)."})
    invitation_url = fields.String(required=True, allow_none=True, metadata={
        "description": "PUBLIC_BASE_URL with the code (null when PUBLIC_BASE_URL is unset)."})
    invitation_expires = fields.Integer(required=True, allow_none=True, metadata={
        "description": "When the invitation expires (Unix seconds)."})


class DeletedPerson(marshmallow.Schema):
    deleted = fields.String(required=True, metadata={"description": "The deleted person's user id."})
    counts = fields.Dict(keys=fields.String(), values=fields.Integer(), required=True, metadata={
        "description": "What went, by kind (sessions, messages, files, api_keys, ...)."})


class InvitationAccepted(SignedIn):
    pass


class PasswordChanged(TokenPair):
    status = fields.String(required=True, validate=validate.Equal("password_changed"))
    user_id = fields.String(required=True)


# ---------------------------------------------------------------- personal API keys

class ApiKey(marshmallow.Schema):
    id = fields.String(required=True)
    user_id = fields.String(required=True)
    name = fields.String(required=True)
    scopes = fields.List(fields.String(), required=True)
    created_at = fields.String(required=True, allow_none=True)
    expires_at = fields.String(required=True, allow_none=True)
    last_used_at = fields.String(required=True, allow_none=True, metadata={
        "description": "The last request made with it (to the minute)."})
    revoked_at = fields.String(required=True, allow_none=True)
    active = fields.Boolean(required=True, metadata={"description": "Neither revoked nor expired."})


class ApiKeyCreated(ApiKey):
    key = fields.String(required=True, metadata={
        "description": "The key, shown this once: send it as Authorization: Bearer <key>."})


class ApiKeyList(marshmallow.Schema):
    keys = fields.List(fields.Nested(ApiKey), required=True)
    total = fields.Integer(required=True)
