"""Domain errors and the one middleware that renders every error as the spec's body
`{"error", "errorType", "hint"}`. Handlers raise; nothing else formats errors."""
from __future__ import annotations

import logging
import uuid
from typing import Any, Mapping

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler

from . import database, redis_bus
from .blobs import BlobError, BlobNotFound
from .typedefs import REQUEST_ID

log = logging.getLogger("gateway.errors")

REQUEST_ID_HEADER = "X-Request-Id"


class ApiError(Exception):
    status = 400
    error_type: str | None = None

    def __init__(self, error: str, error_type: str | None = None, hint: str | None = None,
                 status: int | None = None, headers: Mapping[str, str] | None = None,
                 extra: Mapping[str, Any] | None = None):
        super().__init__(error)
        self.error = error
        if error_type is not None:
            self.error_type = error_type
        self.hint = hint
        if status is not None:
            self.status = status
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def body(self) -> dict:
        body: dict[str, Any] = {"error": self.error}
        if self.error_type:
            body["errorType"] = self.error_type
        if self.hint:
            body["hint"] = self.hint
        body.update(self.extra)
        return body


class BadRequest(ApiError):
    status = 400
    error_type = "bad_request"


class Unauthorized(ApiError):
    status = 401
    error_type = "unauthorized"


class Forbidden(ApiError):
    status = 403
    error_type = "forbidden"


class NotFound(ApiError):
    status = 404
    error_type = "not_found"


class Conflict(ApiError):
    status = 409
    error_type = "conflict"


class TooManyRequests(ApiError):
    status = 429
    error_type = "rate_limited"


class BadGateway(ApiError):
    status = 502
    error_type = "upstream_unreachable"


class ServiceUnavailable(ApiError):
    status = 503
    error_type = "unavailable"


# Text for aiohttp's own HTTP exceptions (unknown route, wrong method, body too large...).
_HTTP_ERRORS = {
    404: ("not_found", "No such endpoint.", "Check the path; every endpoint is under /api/v1."),
    405: ("method_not_allowed", "This method is not allowed on this endpoint.", None),
    413: ("payload_too_large", "The request body is too large.", None),
    415: ("unsupported_media_type", "Unsupported content type.", None),
}


# Retry-After on a 503 of a store that comes back by itself: the embedded PostgreSQL's watchdog
# looks every second, and Redis's client reconnects at the next command.
RETRY_AFTER_SECONDS = "5"


def unavailable_error(error: BaseException) -> ApiError | None:
    """The 503 for an error that says a store the service needs is down (PostgreSQL, Redis),
    None for any other error. HTTP requests and WebSocket frames answer it alike."""
    if database.unavailable(error):
        return ServiceUnavailable(
            "The database is unavailable.", error_type="database_unavailable",
            hint="Try again in a few seconds. Operators: check DATABASE_URL's server, or the embedded "
                 "one in DATA_DIR/postgres (its log is postgres/log there); see docs/operations.md.",
            headers={"Retry-After": RETRY_AFTER_SECONDS})
    if redis_bus.unavailable(error):
        return ServiceUnavailable(
            "The message bus (Redis) is unavailable.", error_type="bus_unavailable",
            hint="Try again in a few seconds. Operators: check the Redis server at REDIS_URL; "
                 "see docs/operations.md.",
            headers={"Retry-After": RETRY_AFTER_SECONDS})
    return None


def error_response(error: ApiError, request_id: str | None = None) -> web.Response:
    headers = dict(error.headers)
    if request_id:
        headers[REQUEST_ID_HEADER] = request_id
    return web.json_response(error.body(), status=error.status, headers=headers)


def _from_http_exception(exc: web.HTTPException, request: web.Request) -> ApiError:
    error_type, text, hint = _HTTP_ERRORS.get(exc.status, ("http_error", exc.reason, None))
    headers = {}
    if exc.status == 405 and isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = sorted(exc.allowed_methods)
        headers["Allow"] = ",".join(allowed)
        hint = f"Allowed: {', '.join(allowed)}."
    if exc.status == 413:
        limit = request.app._client_max_size  # the configured limit, for the hint
        hint = f"The limit is {limit} bytes."
    return ApiError(text, error_type=error_type, hint=hint, status=exc.status, headers=headers)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex[:16]
    request[REQUEST_ID] = request_id
    if "\x00" in request.path or "\x00" in request.rel_url.query_string:
        # No identifier or text the services store may hold NUL (PostgreSQL text cannot).
        return error_response(BadRequest("The address holds a NUL character (%00).", error_type="invalid_characters",
                                         hint="Remove %00 from the path and the query."), request_id)
    try:
        return await handler(request)
    except ApiError as error:
        return error_response(error, request_id)
    except web.HTTPException as exc:
        if exc.status < 400:  # redirects and successes raised as exceptions pass through
            raise
        if exc.content_type == "application/json":
            return exc  # already a spec body, made by a handler that built it itself
        return error_response(_from_http_exception(exc, request), request_id)
    except BlobNotFound:
        return error_response(ApiError("The stored object is missing.", error_type="file_missing", status=404),
                              request_id)
    except BlobError as error:
        # File storage (S3, MinIO, the disk) failed: a downstream service, not the request.
        log.warning("blob storage failed in %s %s: %s", request.method, request.path, error)
        return error_response(ApiError("File storage is unavailable.", error_type="storage_unavailable",
                                       status=502, hint="Try again later; the operator can check S3_ENDPOINT."),
                              request_id)
    except HttpProcessingError as error:
        # aiohttp's parsers raise these while a handler reads a malformed body (a broken
        # multipart part, bad chunking): the client's mistake, whichever plugin was reading.
        status = error.code if 400 <= (error.code or 0) < 500 else 400
        return error_response(ApiError(f"The request body could not be parsed: {error.message}".strip(),
                                       error_type="malformed_request", status=status,
                                       hint="Check the body's encoding against its Content-Type."), request_id)
    except ConnectionResetError:
        raise
    except Exception as error:
        if (unavailable := unavailable_error(error)) is not None:
            log.warning("%s %s: %s (%s)", request.method, request.path, unavailable.error, error)
            return error_response(unavailable, request_id)
        log.exception("unexpected error in %s %s (request id %s)", request.method, request.path,
                      request_id)
        return error_response(ApiError(
            "Internal server error.", error_type="internal_error", status=500,
            hint=f"Quote request id {request_id} when reporting this; details are in the service log."),
            request_id)
