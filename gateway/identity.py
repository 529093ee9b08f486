"""Who is calling. The core defines only the shape of an identity (`Identity`, kept in
gateway/typedefs.py beside the request key that holds it) and the questions every plugin
asks; the auth plugin answers them by providing the `AUTHENTICATOR` contract. (Who may talk to
the assistant is the chat plugin's rule: `plugins.chat.contract.may_chat`.)

    from gateway.identity import require_user, require_admin, owner_for

    async def handler(request):
        user = await require_user(request)           # 401 without a valid token
        owner = owner_for(user, request.query.get("user_id"))  # whose data
"""
from __future__ import annotations

from typing import Protocol

from aiohttp import web

from .context import get_context
from .contracts import ContractKey
from .errors import Forbidden, Unauthorized
from .typedefs import IDENTITY, Identity

ADMIN_USER_ID = "admin"


class Authenticator(Protocol):
    async def identify(self, request: web.Request) -> Identity | None:
        """The caller's identity, None when no credential was sent; raise Unauthorized for a bad one."""
        ...


AUTHENTICATOR: ContractKey[Authenticator] = ContractKey("core.authenticator", "who is calling")


async def current_identity(request: web.Request) -> Identity | None:
    cached: Identity | None = request.get(IDENTITY)
    if cached is not None:
        return cached
    authenticator = get_context(request).contracts.get(AUTHENTICATOR)
    if authenticator is None:
        raise Unauthorized("Authentication is not available on this service.",
                           hint="Load the auth plugin in this service.")
    identity = await authenticator.identify(request)
    if identity is not None:
        request[IDENTITY] = identity
    return identity


async def require_user(request: web.Request) -> Identity:
    identity = await current_identity(request)
    if identity is None:
        raise Unauthorized("Authentication required.", error_type="unauthorized",
                           hint="Send Authorization: Bearer <access token> from POST /api/v1/auth/login.")
    return identity


async def require_admin(request: web.Request) -> Identity:
    return ensure_admin(await require_user(request))


def ensure_admin(identity: Identity) -> Identity:
    """`identity`, when it is the administrator's (requests and WebSocket frames alike)."""
    if not identity.is_admin:
        raise Forbidden("This operation is limited to the administrator.", error_type="admin_only",
                        hint="Log in with the administrator account.")
    return identity


def owner_for(identity: Identity, requested_user_id: str | None) -> str:
    """Whose data a request acts on: one's own, or anyone's for the administrator."""
    if requested_user_id and requested_user_id != identity.user_id:
        if not identity.is_admin:
            raise Forbidden("You may only act on your own data.", error_type="forbidden",
                            hint="Leave out user_id, or log in as the administrator.")
        return requested_user_id
    return identity.user_id
