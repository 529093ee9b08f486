"""The simulated home: the eight devices every person gets on first use (the same stable ids for
everybody), and the weather inside it — each room's temperature (and the bedroom's humidity)
drifts towards the ambient values, or follows the room's air conditioner while it runs. The
living room has no sensor of its own: its temperature is what its air conditioner's built-in
thermometer reads (`temperature`, read-only, as Home Assistant's climate entities report a
current temperature), so "when the living room goes above 28 °C" is a rule on that property."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .model import Device

ROOMS = {
    "bedroom": {"en": "Bedroom", "zh": "卧室"},
    "living_room": {"en": "Living room", "zh": "客厅"},
    "entrance": {"en": "Entrance", "zh": "玄关"},
}

LIGHT = {
    "on": {"type": "bool", "writable": True},
    "brightness": {"type": "int", "min": 0, "max": 100, "unit": "%", "writable": True},
    "color_temp": {"type": "int", "min": 2700, "max": 6500, "unit": "K", "writable": True},
}
AIR_CONDITIONER = {
    "on": {"type": "bool", "writable": True},
    "mode": {"type": "enum", "options": ["cool", "heat", "fan", "dry", "auto"], "writable": True},
    "target_temperature": {"type": "number", "min": 16, "max": 30, "step": 0.5, "unit": "°C", "writable": True},
    "fan": {"type": "enum", "options": ["auto", "low", "medium", "high"], "writable": True},
    "temperature": {"type": "number", "unit": "°C", "precision": 0.1, "writable": False,
                    "description": "the room's temperature, read by the unit's own thermometer"},
}
TEMPERATURE = {"temperature": {"type": "number", "unit": "°C", "precision": 0.1, "writable": False}}
HUMIDITY = {"humidity": {"type": "number", "min": 0, "max": 100, "unit": "%", "precision": 1, "writable": False}}
CURTAIN = {"position": {"type": "int", "min": 0, "max": 100, "unit": "%", "writable": True,
                        "description": "0 closed, 100 fully open"}}
LOCK = {"locked": {"type": "bool", "writable": True}}

# (id, type, room, English name, Chinese name, properties, initial state), in the order listed.
CATALOG: list[tuple[str, str, str, str, str, dict, dict]] = [
    ("bedroom_light", "light", "bedroom", "Bedroom light", "卧室灯", LIGHT,
     {"on": False, "brightness": 60, "color_temp": 3000}),
    ("bedroom_ac", "air_conditioner", "bedroom", "Bedroom air conditioner", "卧室空调", AIR_CONDITIONER,
     {"on": False, "mode": "cool", "target_temperature": 26, "fan": "auto", "temperature": 26.5}),
    ("bedroom_temperature", "temperature_sensor", "bedroom", "Bedroom temperature sensor", "卧室温度传感器",
     TEMPERATURE, {"temperature": 26.5}),
    ("bedroom_humidity", "humidity_sensor", "bedroom", "Bedroom humidity sensor", "卧室湿度传感器", HUMIDITY,
     {"humidity": 55}),
    ("living_room_light", "light", "living_room", "Living room light", "客厅灯", LIGHT,
     {"on": False, "brightness": 80, "color_temp": 4000}),
    ("living_room_ac", "air_conditioner", "living_room", "Living room air conditioner", "客厅空调",
     AIR_CONDITIONER, {"on": False, "mode": "cool", "target_temperature": 26, "fan": "auto", "temperature": 27.0}),
    ("living_room_curtain", "curtain", "living_room", "Living room curtain", "客厅窗帘", CURTAIN, {"position": 0}),
    ("front_door_lock", "lock", "entrance", "Front door lock", "前门智能门锁", LOCK, {"locked": True}),
]
DEVICE_IDS = [entry[0] for entry in CATALOG]


def home_of(owner: str) -> list[Device]:
    """A fresh simulated home for `owner`."""
    return [Device(owner=owner, id=device_id, adapter="simulation", type=kind,
                   names={"en": english, "zh": chinese}, room=room, room_names=dict(ROOMS[room]),
                   properties={name: dict(spec) for name, spec in properties.items()}, state=dict(state),
                   sort_key=position)
            for position, (device_id, kind, room, english, chinese, properties, state) in enumerate(CATALOG)]


@dataclass(frozen=True)
class RoomClimate:
    """A room's air conditioner and the devices that report the room's air: every thermometer
    reports the same temperature (the bedroom's sensor and its AC's own thermometer agree)."""
    ac: str
    thermometers: tuple[str, ...]
    hygrometer: str | None = None

    def devices(self) -> list[str]:
        return [self.ac, *self.thermometers, *([self.hygrometer] if self.hygrometer else [])]


ROOM_CLIMATE = {
    "bedroom": RoomClimate("bedroom_ac", ("bedroom_temperature", "bedroom_ac"), "bedroom_humidity"),
    "living_room": RoomClimate("living_room_ac", ("living_room_ac",)),
}
DRIFTING = sorted({device_id for room in ROOM_CLIMATE.values() for device_id in room.devices()})


class Weather:
    """One step of the simulated climate per tick. The precise values are kept between ticks
    (in memory) so that slow drift accumulates; what is stored and reported is rounded (0.1 °C,
    1 %), and only a change of the rounded value is a state change."""

    def __init__(self, seed: int | None = None):
        self.random = random.Random(seed)
        self.precise: dict[tuple[str, str], float] = {}

    @staticmethod
    def ambient_temperature(now: datetime) -> float:
        """Warmest mid-afternoon, coolest before dawn: 23.5 to 28.5 °C."""
        hour = now.astimezone(timezone.utc).hour + now.minute / 60
        return 26.0 + 2.5 * math.sin(2 * math.pi * (hour - 9) / 24)

    AMBIENT_HUMIDITY = 60.0

    def step(self, owner: str, states: dict[str, dict[str, Any]], now: datetime) -> dict[str, dict[str, Any]]:
        """{device_id: {property: new rounded value}} for the sensors of `owner` whose reported
        value changes this tick; `states` holds the current state of the room's devices."""
        changed: dict[str, dict[str, Any]] = {}
        for room_name, room in ROOM_CLIMATE.items():
            ac = states.get(room.ac)
            if ac is None:
                continue
            running = bool(ac.get("on"))
            mode, target = ac.get("mode"), float(ac.get("target_temperature") or 26)
            thermometers = [device_id for device_id in room.thermometers if device_id in states]
            if thermometers:
                reported = states[thermometers[0]].get("temperature")
                now_value = self._precise(owner, f"{room_name}:temperature", reported, 26.5, 0.1)
                gap = target - now_value
                if running and (mode == "auto" or (mode == "cool" and gap < 0) or (mode == "heat" and gap > 0)):
                    # An air conditioner works fast: 15 % of the way per tick, at least 0.1 °C, no overshoot.
                    move = math.copysign(min(abs(gap), max(0.1, 0.15 * abs(gap))), gap)
                elif running and mode == "dry" and gap < 0:
                    move = max(gap, -0.05)
                else:
                    move = 0.02 * (self.ambient_temperature(now) - now_value) + self.random.gauss(0, 0.03)
                value = min(60.0, max(-20.0, now_value + move))
                self.precise[(owner, f"{room_name}:temperature")] = value
                rounded = round(value, 1)
                for device_id in thermometers:
                    if rounded != states[device_id].get("temperature"):
                        changed.setdefault(device_id, {})["temperature"] = rounded
            if room.hygrometer and room.hygrometer in states:
                reported = states[room.hygrometer].get("humidity")
                now_value = self._precise(owner, f"{room_name}:humidity", reported, 55, 1.0)
                if running and mode == "dry":
                    value = max(35.0, now_value - 1.0)
                elif running and mode in ("cool", "auto") and now_value > 40:
                    value = max(40.0, now_value - 0.3)
                else:
                    value = now_value + 0.05 * (self.AMBIENT_HUMIDITY - now_value) + self.random.gauss(0, 0.2)
                value = min(100.0, max(0.0, value))
                self.precise[(owner, f"{room_name}:humidity")] = value
                rounded_humidity = int(round(value))
                if rounded_humidity != states[room.hygrometer].get("humidity"):
                    changed.setdefault(room.hygrometer, {})["humidity"] = rounded_humidity
        return changed

    def _precise(self, owner: str, quantity: str, reported: Any, default: float, precision: float) -> float:
        """The precise value kept from the last tick while it still rounds to what is stored
        (a restart, or another instance's tick, starts again from the stored value)."""
        stored = float(reported) if isinstance(reported, (int, float)) and not isinstance(reported, bool) else default
        kept = self.precise.get((owner, quantity))
        if kept is not None and abs(kept - stored) <= precision / 2 + 1e-9:
            return kept
        return stored
