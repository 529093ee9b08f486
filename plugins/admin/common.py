"""What the administrator's endpoints share: the path prefix, the keys a path may name, the
request bodies and queries validated field by field, and the AI core's client."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.errors import BadRequest
from gateway.validation import MAX_OFFSET, finite_number
from plugins.ai_core.contract import AI_CORE, AiCore

PREFIX = "/api/v1/admin"
KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,99}\Z")
KEY_RULE = "1-100 characters: letters, digits and . _ : @ + - (starting with a letter or digit)"
KNOWN_PARAMS = {  # name -> (lowest, highest, whole numbers only)
    "temperature": (0.0, 2.0, False),
    "top_p": (0.0, 1.0, False),
    "max_tokens": (1, 1_000_000, True),
    "presence_penalty": (-2.0, 2.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
}

KEY_PARAMETER = {"pattern": KEY_PATTERN.pattern, "maxLength": 100}  # what path_key accepts, for the document


def path_key(request: web.Request, name: str, what: str) -> str:
    value = request.match_info[name]
    if not KEY_PATTERN.match(value):
        raise BadRequest(f"Invalid {what} {value!r}.", error_type="validation_error", hint=f"Use {KEY_RULE}.")
    return value


def same_as_path(in_path: str, in_body: str | None, field_name: str) -> None:
    if in_body is not None and in_body != in_path:
        raise BadRequest(f"The {field_name} in the body ({in_body!r}) differs from the one in the path "
                         f"({in_path!r}).", error_type="validation_error",
                         hint=f"Leave {field_name} out of the body or make the two equal.")


# ---------------------------------------------------------------- schemas

def _http_url(value: str) -> None:
    try:
        parts = urlsplit(value)
    except ValueError as error:  # an unclosed `[` of an IPv6 host: `http://[::1/`
        raise marshmallow.ValidationError(f"is not a URL: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise marshmallow.ValidationError("must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise marshmallow.ValidationError("must not carry credentials; put the key in api_key")
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise marshmallow.ValidationError("has an invalid port") from None


def _no_control_characters(value: str) -> None:
    if any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise marshmallow.ValidationError("must not contain spaces or control characters")


class StrictSchema(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.RAISE


class ProviderBody(StrictSchema):
    name = fields.String(load_default=None)
    base_url = fields.String(required=True, validate=[validate.Length(min=1, max=2000), _http_url])
    api_key = fields.String(load_default=None, allow_none=True,
                            validate=[validate.Length(max=1000), _no_control_characters])


def _params(value: dict) -> None:
    for name, (lowest, highest, whole) in KNOWN_PARAMS.items():
        if name not in value or value[name] is None:
            continue
        number = value[name]
        if not finite_number(number):
            raise marshmallow.ValidationError(f"{name} must be a number")
        if whole and not isinstance(number, int):
            raise marshmallow.ValidationError(f"{name} must be a whole number")
        if not lowest <= number <= highest:
            raise marshmallow.ValidationError(f"{name} must be between {lowest:g} and {highest:g}")


class ModelBody(StrictSchema):
    id = fields.String(load_default=None)
    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    provider = fields.String(required=True, validate=validate.Regexp(KEY_PATTERN, error=f"must be {KEY_RULE}"))
    description = fields.String(load_default="", validate=validate.Length(max=2000))
    priority = fields.Integer(load_default=0, strict=True,
                              validate=validate.Range(min=0, max=1_000_000, error="must be 0 or more"))
    tags = fields.List(fields.String(validate=validate.Length(min=1, max=50)), load_default=list,
                       validate=validate.Length(max=32))
    params = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=64)), load_default=dict,
                         validate=_params)
    enabled = fields.Boolean(load_default=True)
    updated_at = fields.Raw(load_default=None, load_only=True)  # read-only; a listed model may come back as is


class RouteBody(StrictSchema):
    purpose = fields.String(load_default=None)
    fallback_chain = fields.List(fields.String(validate=validate.Length(min=1, max=100)), required=True,
                                 validate=validate.Length(min=1, max=20, error="must name 1 to 20 models"))
    required = fields.Boolean(load_default=False)


class NoteBody(StrictSchema):
    note = fields.String(required=True, validate=validate.Length(max=1000))


class ClientsQuery(StrictSchema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=200))


class MessagesQuery(StrictSchema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=200), metadata={
        "description": "Whose session (ids are per user); without it, the most recently updated session of that id."})
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=500))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))


class HealthCheckBody(StrictSchema):
    provider = fields.String(required=True, validate=validate.Regexp(KEY_PATTERN, error=f"must be {KEY_RULE}"))


class FetchModelsQuery(StrictSchema):
    url = fields.String(load_default=None, validate=[validate.Length(min=1, max=2000), _http_url])


def ai_core_of(request: web.Request) -> AiCore:
    return get_context(request).contracts.require(AI_CORE)
