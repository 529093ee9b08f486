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
