"""How times are written: one RFC 3339 form for every answer, and milliseconds since the epoch
for every frame's `timestamp`."""
from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal, overload


def now_ms() -> int:
    return int(time.time() * 1000)


@overload
def rfc3339(instant: datetime, timespec: Literal["seconds", "milliseconds"] = ...) -> str: ...
@overload
def rfc3339(instant: None, timespec: Literal["seconds", "milliseconds"] = ...) -> None: ...


def rfc3339(instant: datetime | None, timespec: Literal["seconds", "milliseconds"] = "milliseconds") -> str | None:
    """`2026-11-24T09:00:00.000Z` (or to the second where the spec shows seconds); None stays None."""
    if instant is None:
        return None
    return instant.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
