"""Every typed key the core stores on the application. Plugins keep their own keys."""
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from .context import Context
    from .identity import Identity
    from .plugins import Registry

# Declared by annotation where the value's class would be a circular import at run time.
CONTEXT: web.AppKey[Context] = web.AppKey("context")
REGISTRY: web.AppKey[Registry] = web.AppKey("registry")
SERVICE_ID = web.AppKey("service_id", str)
# Which of `gateway serve --workers N`'s processes this is (0 to N-1); absent with one process.
WORKER_INDEX = web.AppKey("worker_index", int)

# Per-request state.
REQUEST_ID = web.RequestKey("request_id", str)
IDENTITY: web.RequestKey[Identity] = web.RequestKey("identity")
