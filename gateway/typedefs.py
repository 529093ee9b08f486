"""The typed keys the core stores on the application and on each request, and the shape of
who is calling (`Identity`), which every part of the core reads. Imports nothing of the gateway,
so any module may stand on it; a key holding a core object lives beside that object's class
(`gateway.context.CONTEXT`, `gateway.plugins.REGISTRY`). Plugins keep their own keys."""
from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

SERVICE_ID = web.AppKey("service_id", str)
# Which of `gateway serve --workers N`'s processes this is (0 to N-1); absent with one process.
WORKER_INDEX = web.AppKey("worker_index", int)


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    username: str
    is_admin: bool = False
    nickname: str = ""
    # "user" for people; "service" for another service calling with the service credential.
    kind: str = "user"
    # What a personal API key may do (`chat`, `mcp`, `read`, `write`); None for a sign-in token,
    # which may do everything its person may. Checked by `plugins.auth.contract.require_scope`.
    scopes: frozenset[str] | None = None


# Per-request state.
REQUEST_ID = web.RequestKey("request_id", str)
IDENTITY: web.RequestKey[Identity] = web.RequestKey("identity")
