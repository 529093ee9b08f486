"""What the devices feature offers other plugins of the gateway: `DEVICES`, the person's devices
as the IoT service holds them (plugin `devices`, plugins/iot/gateway.py), and a way to hear every
change of any device once (the automation rules' device-state triggers use it).

Devices and operations are plain dicts exactly as the IoT service answers them (docs/iot.md,
"The IoT service": a device has id, name, names, room, room_names, type, adapter, online, state,
properties, updated_at). Every call names the person it acts for; the gateway asks the service
with its own credential on their behalf."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable, Protocol

from gateway.contracts import ContractKey
from gateway.peers import PeerFailed


@dataclass(frozen=True)
class DeviceChange:
    """One change of one device's state, as the IoT service announced it."""
    event_id: str
    user_id: str
    device_id: str
    device: dict
    changes: dict[str, dict]   # {"temperature": {"from": 27.5, "to": 28.1}}
    cause: str                 # "operation" | "simulation" | "mqtt"
    timestamp: str             # RFC 3339, as the service wrote it


class DeviceError(PeerFailed):
    """The IoT service refused a call (400 `invalid_operation`, 403 `operation_refused`, 404
    `device_not_found`, 502/503 `device_unreachable`) or could not be asked (502
    `iot_service_unreachable`): the core's one error of a call to another service. `status`,
    `error_type` and `hint` carry its answer so a route can pass it on unchanged."""
    status = 502
    error_type = "iot_service_unreachable"


class Devices(Protocol):
    async def list(self, user_id: str) -> list[dict]:
        """The person's devices (their simulated home, plus the real ones they own)."""
        ...

    async def get(self, user_id: str, device_id: str) -> dict:
        """The device; DeviceError 404 `device_not_found` when the person has no such device."""
        ...

    async def operate(self, user_id: str, device_id: str, operation: dict, *, source: str) -> dict:
        """operation: the operate body (`{"action": "switch", "value": true}`, `{"action": "set",
        "property": ..., "value": ...}` or `{"action": "set", "properties": {...}}`); returns
        `{"device", "operation"}`. DeviceError as the service answered."""
        ...

    def on_change(self, listener: Callable[[DeviceChange], Awaitable[None]]) -> None:
        """listener runs once per change across all gateway instances (on the instance that
        holds the feed from the IoT service); it may still, rarely, hear a change twice at a
        feed hand-over, so exactly-once consumers dedupe on event_id."""
        ...


DEVICES: ContractKey[Devices] = ContractKey("iot.devices", "the person's devices")
