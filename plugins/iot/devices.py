"""The IoT service's one device model over its adapters: every owner's devices, operations (all
validated here, whatever the adapter), their history, and the pushed state changes — each change
goes to the owner's subscribers and to those watching every owner (the gateway's feed), through
the core hub, whose per-connection bounded queue closes a subscriber that stops reading instead
of stalling the others."""
from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.context import Context
from gateway.database import transaction

from .model import (Device, DeviceUnreachable, OperationRefused, changes_between, device_not_found,
                    requested_values, timestamp)
from .simulation import home_of
from .store import DeviceStore
from .settings import IotSettings

log = logging.getLogger("plugins.iot")

# The hub key of the subscribers that hear every owner's changes (the service credential, the
# gateway's feed); a person's subscriptions are under their user id. The hub keeps each
# service's connections apart, so the gateway's chat devices never hear these frames.
EVERY_OWNER = "iot:all"


class DeviceAdapter(Protocol):
    """Where devices come from and how an operation reaches them. The service validates every
    operation against the device's properties before the adapter sees it."""
    name: str

    async def run(self) -> None:
        """The adapter's life (a service job): the simulation's ticks, the MQTT connection."""
        ...

    async def command(self, device: Device, values: dict[str, Any]) -> dict[str, Any]:
        """Carry out `values` (validated, each different from the state); return the values to
        store now (a device that confirms on its own reports the rest later). Raise
        DeviceUnreachable when it cannot be reached."""
        ...


@dataclass
class Outcome:
    device: Device
    operation: dict


class DeviceService:
    def __init__(self, context: Context, settings: IotSettings):
        self.context = context
        self.settings = settings
        self.adapters: dict[str, DeviceAdapter] = {}
        self._homes: set[str] = set()  # owners whose simulated home is known to exist

    @property
    def store(self) -> DeviceStore:
        return DeviceStore(self.context.db)

    @property
    def enabled(self) -> list[str]:
        return list(self.adapters)

    # ------------------------------------------------------------ reads
    async def ensure_home(self, owner: str) -> None:
        if "simulation" in self.adapters and owner not in self._homes:
            await self.store.insert_missing(home_of(owner))
            self._homes.add(owner)

    async def list_devices(self, owner: str, room: str | None = None, kind: str | None = None) -> list[Device]:
        await self.ensure_home(owner)
        return await self.store.list_devices(owner, self.enabled, room, kind)

    async def get(self, owner: str, device_id: str) -> Device:
        await self.ensure_home(owner)
        device = await self.store.get(owner, device_id, self.enabled)
        if device is None:
            raise device_not_found(device_id)
        return device

    async def history(self, owner: str, device_id: str, limit: int, offset: int) -> tuple[list[dict], int]:
        await self.ensure_home(owner)
        operations, total = await self.store.history(owner, device_id, limit, offset)
        # A removed device's history stays readable; an id that never had one is unknown.
        if total == 0 and await self.store.get(owner, device_id, self.enabled) is None:
            raise device_not_found(device_id)
        return operations, total

    # ------------------------------------------------------------ operations
    async def operate(self, owner: str, device_id: str, operation: dict, *, actor: str, source: str) -> Outcome:
        """Validate, refuse or carry out, record, push. Raises the 400/403/404/503 of the API;
        a refused or unreachable operation is recorded as failed first."""
        await self.ensure_home(owner)
        failure: Exception | None = None
        async with transaction(self.context.db) as cursor:
            device = await self.store.locked(cursor, owner, device_id)
            if device is None or device.adapter not in self.adapters:
                raise device_not_found(device_id)
            values = requested_values(device, operation)
            changes = changes_between(device.state, values)
            action = str(operation["action"])
            if "locked" in changes and changes["locked"]["to"] is False and not self.settings.allow_remote_unlock:
                failure = OperationRefused(
                    f"Unlocking {device.id} remotely is refused by the operator's configuration.",
                    hint="Unlock it at the door, or set [plugins.iot] allow_remote_unlock = true.")
            elif changes and not device.online:
                failure = DeviceUnreachable(f"{device.id} is offline.", hint="Check the device and its adapter.")
            applied: dict[str, Any] = {}
            if failure is None and changes:
                try:
                    applied = await self.adapters[device.adapter].command(
                        device, {name: change["to"] for name, change in changes.items()})
                except DeviceUnreachable as error:
                    failure = error
            if failure is not None:
                record = await self.store.record(cursor, owner, device.id, action, changes, source, actor,
                                                 False, str(failure))
            else:
                if applied:
                    device = await self.store.write_state(cursor, device, applied)
                record = await self.store.record(cursor, owner, device.id, action, changes, source, actor, True, None)
        if failure is not None:
            raise failure
        if applied:
            await self.push(device, {name: changes[name] for name in applied if name in changes}, "operation",
                            record["id"])
        return Outcome(device, record)

    # ------------------------------------------------------------ what adapters report
    async def report(self, owner: str, device_id: str, values: dict[str, Any], cause: str) -> Device | None:
        """A device's new values (a simulated sensor's drift, an MQTT state message); stored and
        pushed when they change the state."""
        async with transaction(self.context.db) as cursor:
            device = await self.store.locked(cursor, owner, device_id)
            if device is None:
                return None
            changes = changes_between(device.state, values)
            if not changes:
                return device
            device = await self.store.write_state(cursor, device, {name: values[name] for name in changes})
        await self.push(device, changes, cause, None)
        return device

    async def announce(self, device: Device, *, keep_online: bool = False) -> Device:
        """A device an adapter found (or found again, changed); `keep_online`: its availability
        is its own to say (a stored device keeps its online flag)."""
        stored = await self.store.upsert_description(device, keep_online)
        await self.push(stored, {}, device.adapter, None)
        return stored

    async def remove(self, owner: str, device_id: str) -> None:
        if await self.store.remove(owner, device_id):
            frame = {"type": "device_removed", "event_id": uuid.uuid4().hex, "user_id": owner,
                     "device_id": device_id, "timestamp": timestamp()}
            await self._send(owner, frame)

    async def set_online(self, adapter: str, online: bool, owner: str | None = None,
                         device_id: str | None = None) -> None:
        for device in await self.store.set_online(adapter, online, owner, device_id):
            await self.push(device, {"online": {"from": not online, "to": online}}, adapter, None)

    # ------------------------------------------------------------ pushing
    async def push(self, device: Device, changes: dict, cause: str, operation_id: str | None) -> None:
        frame = {"type": "device_update", "event_id": uuid.uuid4().hex, "user_id": device.owner,
                 "device_id": device.id, "device": device.public(), "changes": changes, "cause": cause,
                 "operation_id": operation_id, "timestamp": timestamp()}
        await self._send(device.owner, frame)

    async def _send(self, owner: str, frame: dict) -> None:
        try:
            payload = json.dumps(frame, ensure_ascii=False)  # encoded once for both
            await self.context.hub.send_to_user(owner, payload)
            await self.context.hub.send_to_user(EVERY_OWNER, payload)
        except Exception:  # the change is stored; a bus hiccup must not fail the operation
            log.exception("pushing a device change of %s failed", owner)
