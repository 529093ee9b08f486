"""The bridge's typed app key."""
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from .bridge import Bridge

BRIDGE: web.AppKey["Bridge"] = web.AppKey("platform_bridge.bridge")
