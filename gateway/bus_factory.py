"""Which bus a service runs on (bus.py): Redis when `REDIS_URL` is set, else the in-process one."""
from __future__ import annotations

from .bus import Bus
from .config import Config
from .memory_bus import InProcessBus
from .redis_bus import RedisBus


async def create_bus(config: Config) -> Bus:
    url = config.get("bus.redis_url")
    prefix = config.get("bus.prefix") or "assistant:"
    if not url:
        return InProcessBus(prefix)
    bus = RedisBus(url, prefix, int(config.get("bus.max_connections") or 256))
    try:
        await bus.ping()
    except Exception as error:
        await bus.close()
        raise ConnectionError(f"cannot reach Redis at REDIS_URL ({error}); unset REDIS_URL to run "
                              f"one instance on the in-process bus") from error
    return bus
