"""Which bus a service runs on (bus.py): Redis when `REDIS_URL` is set, else the in-process one."""
from __future__ import annotations

from .bus import Bus
from .config import Config
from .memory_bus import InProcessBus
from .redis_bus import RedisBus


async def create_bus(config: Config) -> Bus:
    settings = config.settings.bus
    if not settings.redis_url:
        return InProcessBus(settings.prefix)
    bus = RedisBus(settings.redis_url, settings.prefix, settings.max_connections)
    try:
        await bus.ping()
    except Exception as error:
        await bus.close()
        raise ConnectionError(f"cannot reach Redis at REDIS_URL ({error}); unset REDIS_URL to run "
                              f"one instance on the in-process bus") from error
    return bus
