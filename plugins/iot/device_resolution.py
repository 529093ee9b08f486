"""Which of the person's devices a tool call means (docs/iot.md, "The assistant's tools").

A device is named the way people name it — by its name in any language ("客厅灯"), by room and
kind ("bedroom" + "air_conditioner"), by what it reports ("temperature" in the bedroom) — or by
its id; `resolve` finds it among the person's devices, or says which ones were meant."""
from __future__ import annotations

from .phrases import PROPERTY_TYPES, ROOM_WORDS, TYPE_WORDS, find_word, normalize, room_in, type_in


def _names(device: dict) -> list[str]:
    return [normalize(name) for name in [device.get("name") or "", *(device.get("names") or {}).values()] if name]


def _room_names(device: dict) -> list[str]:
    return [normalize(name) for name in [device.get("room") or "", *(device.get("room_names") or {}).values()] if name]


def in_room(device: dict, room: str) -> bool:
    said = normalize(room).removeprefix("the ")
    known = ROOM_WORDS.get(said) or ROOM_WORDS.get(room_in(said) or "")
    return (known is not None and device.get("room") == known) or said in _room_names(device)


def type_of(said: str) -> str:
    """A kind of device as the model or a person said it, as a device type."""
    said = normalize(said)
    return TYPE_WORDS.get(said) or type_in(said) or said.replace(" ", "_")


# A reading and the properties that report it: a room without a thermometer has its air
# conditioner's own (`temperature` in the simulation and the MQTT climate mapping;
# `current_temperature` where a device names it so).
READINGS = {"temperature": ("temperature", "current_temperature"), "humidity": ("humidity", "current_humidity")}


def reading_of(device: dict, reading: str) -> str | None:
    """The property of `device` that reports `reading`, or None."""
    state = device.get("state") or {}
    return next((name for name in READINGS.get(reading, (reading,)) if name in state), None)


class Resolution:
    """The device meant (`device`), or what to tell the person: none fits, or several do."""

    def __init__(self, device: dict | None = None, candidates: list[dict] | None = None):
        self.device = device
        self.candidates = candidates or []


_FILLERS = {"the", "my", "a", "our", "in", "of"}


def resolve(devices: list[dict], *, device: str | None = None, room: str | None = None, kind: str | None = None,
            reading: str | None = None) -> Resolution:
    if device:
        said = normalize(device).removeprefix("the ").removeprefix("my ")
        for candidate in devices:
            if said == normalize(candidate["id"]) or said in _names(candidate):
                return Resolution(candidate)
        named = [candidate for candidate in devices
                 if any(said in name or name in said for name in _names(candidate))]
        if len(named) == 1:
            return Resolution(named[0])
        room_word, kind_word = room_in(said), find_word(said, TYPE_WORDS)
        room = room or room_word
        kind = kind or (kind_word[1] if kind_word else None)
        if not room and not kind:
            return Resolution(candidates=named)
        # Words besides the room and the kind ("garage" of "garage door") must be in the name.
        rest = said
        for word in (room_word, kind_word[0] if kind_word else None):
            rest = rest.replace(word, " ") if word else rest
        rest = " ".join(part for part in rest.replace("的", " ").split() if part not in _FILLERS)
        if rest:
            candidates = [candidate for candidate in devices
                          if any(rest in name for name in _names(candidate) + _room_names(candidate))]
            return resolve(candidates, room=room, kind=kind, reading=reading) if candidates else Resolution()
    candidates = list(devices)
    if kind:
        wanted = type_of(kind)
        candidates = [candidate for candidate in candidates if candidate["type"] == wanted]
    elif reading:
        candidates = [candidate for candidate in candidates if reading_of(candidate, reading) is not None]
        if room and any(in_room(other, room) for other in devices):
            # What reports it in that room: its sensor, else its air conditioner.
            candidates = [candidate for candidate in candidates if in_room(candidate, room)]
        preferred = [candidate for candidate in candidates if candidate["type"] == PROPERTY_TYPES.get(reading)]
        candidates = preferred or candidates
    if room:
        here = [candidate for candidate in candidates if in_room(candidate, room)]
        # A place that is none of the person's rooms ("the front door" for the one lock, filed under
        # the entrance) does not rule out the only device of its kind.
        a_room = any(in_room(other, room) for other in devices)
        candidates = here if here or a_room or len(candidates) != 1 else candidates
    if len(candidates) == 1:
        return Resolution(candidates[0])
    return Resolution(candidates=candidates)


def text_argument(arguments: dict, key: str) -> str | None:
    value = arguments.get(key)
    return str(value) if value not in (None, "") else None
