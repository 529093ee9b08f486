"""The simulation adapter: operations apply at once, and every tick the simulated sensors of
every home drift (simulation.Weather). The MQTT adapter is in mqtt.py."""
from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime, timezone
from typing import Any

from .devices import DeviceService
from .model import Device
from .simulation import DRIFTING, Weather

log = logging.getLogger("plugins.iot.simulation")
TICKER = "iot.simulation.ticker"


class SimulationAdapter:
    name = "simulation"

    def __init__(self, service: DeviceService, tick_seconds: float, seed: int | None = None):
        self.service = service
        self.tick_seconds = tick_seconds
        self.weather = Weather(seed)

    async def command(self, device: Device, values: dict[str, Any]) -> dict[str, Any]:
        return dict(values)

    async def run(self) -> None:
        holder = uuid.uuid4().hex
        bus = self.service.context.bus
        while True:
            await asyncio.sleep(self.tick_seconds)
            try:
                # One instance ticks at a time (a lock on the bus that lapses if its holder dies).
                ttl = max(3 * self.tick_seconds, 5.0)
                if not (await bus.renew_if(TICKER, holder, ttl) or await bus.set(TICKER, holder, ttl,
                                                                                 only_if_absent=True)):
                    continue
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database away for a moment: the next tick tries again
                log.exception("a simulation tick failed")

    async def tick(self, now: datetime | None = None) -> int:
        """One step of every home's climate; how many device states changed."""
        now = now or datetime.now(timezone.utc)
        homes: dict[str, dict[str, dict]] = {}
        for device in await self.service.store.of_adapter("simulation", DRIFTING):
            homes.setdefault(device.owner, {})[device.id] = device.state
        changed = 0
        for owner, states in homes.items():
            for device_id, values in self.weather.step(owner, states, now).items():
                if await self.service.report(owner, device_id, values, "simulation") is not None:
                    changed += 1
        return changed
