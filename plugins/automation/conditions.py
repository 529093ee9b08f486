"""Whether a rule's conditions hold now: a time window in the person's zone, a device's state
(docs/automation.md). Every decision reads the scheduler core's clock (`context.clock`)."""
from __future__ import annotations

import zoneinfo
from typing import Any

from gateway.context import Context
from gateway.errors import ApiError
from plugins.auth.contract import PERSON_ZONES
from plugins.iot.contract import DEVICES, DeviceChange

from .actions import ActionFailed
from .definitions import check_conditions, compare
from .timing import parse_clock

WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def loaded_conditions(raw: Any) -> dict | None:
    try:
        return check_conditions(raw)
    except ApiError as error:
        raise ActionFailed(f"the conditions cannot be checked: {error.error}") from None


async def zone_for(context: Context, user_id: str, config: dict) -> str:
    """The zone a trigger or condition names, else the person's (their profile's, through
    the auth plugin's PERSON_ZONES), else UTC where no auth plugin runs."""
    if config.get("timezone"):
        return str(config["timezone"])
    zones = context.contracts.get(PERSON_ZONES)
    return await zones.zone_of(user_id) if zones is not None else "UTC"


class Conditions:
    """Checks conditions for the runner."""

    def __init__(self, context: Context):
        self.context = context

    async def condition_holds(self, user_id: str, condition: dict, change: DeviceChange | None) -> tuple[bool, str]:
        """Whether the condition holds now, and in words why not."""
        kind = condition["type"]
        if kind in ("all", "any"):
            reasons = []
            for inner in condition["conditions"]:
                holds, why = await self.condition_holds(user_id, inner, change)
                if holds and kind == "any":
                    return True, ""
                if not holds and kind == "all":
                    return False, why
                reasons.append(why)
            return (True, "") if kind == "all" else (False, "none of: " + "; ".join(reasons))
        if kind == "time_window":
            return self._in_window(condition, await zone_for(self.context, user_id, condition))
        return await self._device_condition(user_id, condition, change)

    def _in_window(self, condition: dict, zone: str) -> tuple[bool, str]:
        local = self.context.clock.now().astimezone(zoneinfo.ZoneInfo(zone))
        start, end, clock = parse_clock(condition["start"]), parse_clock(condition["end"]), local.time()
        if start <= end:
            inside = start <= clock < end
        else:  # past midnight: 22:00-06:00
            inside = clock >= start or clock < end
        weekdays = condition.get("weekdays")
        if inside and weekdays and WEEKDAY_NAMES[local.weekday()] not in weekdays:
            return False, f"{WEEKDAY_NAMES[local.weekday()]} is not one of {', '.join(weekdays)}"
        if not inside:
            return False, f"{local:%H:%M} ({zone}) is outside {condition['start']}-{condition['end']}"
        return True, ""

    async def _device_condition(self, user_id: str, condition: dict, change: DeviceChange | None) -> tuple[bool, str]:
        if change is not None and change.user_id == user_id and change.device_id == condition["device_id"]:
            device = change.device
        else:
            device = await self._device(user_id, condition["device_id"])
        value = (device.get("state") or {}).get(condition["property"])
        if compare(value, condition):
            return True, ""
        wanted = next(f"{key} {condition[key]}" for key in ("above", "below", "equals")
                      if condition.get(key) is not None)
        return False, f"{condition['device_id']}.{condition['property']} is {value!r}, not {wanted}"

    async def _device(self, user_id: str, device_id: str) -> dict:
        devices = self.context.contracts.get(DEVICES)
        if devices is None:
            raise ActionFailed("this gateway has no devices feature")
        try:
            return await devices.get(user_id, device_id)
        except ApiError as error:
            raise ActionFailed(f"{device_id}: {error.error}") from None
