"""Every typed key the core stores on the application. Plugins keep their own keys."""
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from .context import Context
    from .identity import Identity
    from .plugins import Registry

CONTEXT = web.AppKey("context", "Context")
REGISTRY = web.AppKey("registry", "Registry")
SERVICE_ID = web.AppKey("service_id", str)

# Per-request state.
REQUEST_ID = web.RequestKey("request_id", str)
IDENTITY = web.RequestKey("identity", "Identity")
