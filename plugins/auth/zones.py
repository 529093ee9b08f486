"""Each person's time zone: what "tomorrow at 9" and "every day at 7" mean for them. Stored
with their preferences (`PUT /api/v1/profile`), else the deployment's default
(`[plugins.auth] default_timezone`), else this machine's own zone — a self-hosted assistant
usually lives where its owner does."""
from __future__ import annotations

import os
import zoneinfo
from pathlib import Path

from gateway.context import Context

from . import store

FALLBACK_ZONE = "UTC"


def valid_zone(name: str) -> bool:
    if not name or name != name.strip() or name.startswith(("/", ".")) or ".." in name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def machine_zone() -> str:
    """This machine's IANA zone: TZ, else where /etc/localtime points, else /etc/timezone."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    return next((name for name in candidates if valid_zone(name)), FALLBACK_ZONE)


class PersonZones:
    """Provided as the `PERSON_ZONES` contract."""

    def __init__(self, context: Context, default_zone: str):
        self.context = context
        self.default_zone = default_zone or machine_zone()

    async def zone_of(self, user_id: str) -> str:
        return (await self.chosen_zone(user_id)) or self.default_zone

    async def chosen_zone(self, user_id: str) -> str | None:
        zone = await store.stored_timezone(self.context.db, user_id)
        return zone if zone is not None and valid_zone(zone) else None

    async def set_zone(self, user_id: str, zone: str) -> None:
        await store.store_timezone(self.context.db, user_id, zone)
