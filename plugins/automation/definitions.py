"""What a rule means: one marshmallow schema per trigger, condition and action type, chosen by
the object's type. A rule is checked whole on every save (create and partial update alike), so
nothing stored can fail to load when it fires; a type nobody knows is a 400 naming it and the
known ones (docs/automation.md)."""
from __future__ import annotations

import re
from typing import Any

import marshmallow
from marshmallow import fields, validate, validates_schema

from gateway.errors import BadRequest
from gateway.validation import finite_numbers_only, load

from .timing import check_zone, parse_clock, parse_cron, parse_instant

MAX_ACTIONS = 20
MAX_CONDITION_DEPTH = 5
MAX_CONDITIONS = 20
EVENT_NAME = r"^[A-Za-z0-9_.\-]{1,64}\Z"
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DEVICE_ACTIONS = ("switch", "set")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
NOTIFY_LEVELS = ("info", "warning", "success")
DELIVERIES = ("session", "notification")


def _timezone(value: str) -> None:
    try:
        check_zone(value)
    except ValueError as error:
        raise marshmallow.ValidationError(str(error)) from None


def _clock(value: str) -> None:
    try:
        parse_clock(value)
    except ValueError as error:
        raise marshmallow.ValidationError(str(error)) from None


class Strict(marshmallow.Schema):
    """A misspelt key is an error, not a silently ignored setting."""
    class Meta:
        unknown = marshmallow.RAISE


def _weekdays() -> fields.List:
    return fields.List(fields.String(validate=validate.OneOf(WEEKDAYS)), validate=validate.Length(min=1, max=7),
                       load_default=None)


class Comparison(Strict):
    """A device property and what it is compared with: exactly one of above, below, equals."""
    device_id = fields.String(required=True, validate=validate.Length(min=1, max=128))
    property = fields.String(required=True, validate=validate.Length(min=1, max=64))
    above = fields.Float(allow_nan=False, load_default=None)
    below = fields.Float(allow_nan=False, load_default=None)
    equals = fields.Raw(load_default=None, validate=finite_numbers_only)

    @validates_schema
    def one_comparison(self, data: dict, **_: Any) -> None:
        given = [key for key in ("above", "below", "equals") if data.get(key) is not None]
        if len(given) != 1:
            raise marshmallow.ValidationError("give exactly one of above, below or equals", "above")
        if given == ["equals"] and not isinstance(data["equals"], (bool, int, float, str)):
            raise marshmallow.ValidationError("equals must be a number, a string or true/false", "equals")


# ---------------------------------------------------------------- triggers

class TimeTrigger(Strict):
    """Once at an instant (`at`), or again and again: `cron`, or `repeat` daily/weekly at `time`."""
    at = fields.String(load_default=None)
    cron = fields.String(load_default=None, validate=validate.Length(max=200))
    repeat = fields.String(load_default=None, validate=validate.OneOf(("daily", "weekly")))
    time = fields.String(load_default=None, validate=_clock)
    weekdays = _weekdays()
    timezone = fields.String(load_default=None, validate=_timezone)

    @validates_schema
    def one_schedule(self, data: dict, **_: Any) -> None:
        given = [key for key in ("at", "cron", "repeat") if data.get(key) is not None]
        if len(given) != 1:
            raise marshmallow.ValidationError("give exactly one of at (once), cron or repeat (daily/weekly)", "at")
        if data.get("at") is not None:
            try:
                parse_instant(data["at"], data.get("timezone") or "UTC")
            except ValueError as error:
                raise marshmallow.ValidationError(str(error), "at") from None
        if data.get("cron") is not None:
            try:
                parse_cron(data["cron"])
            except ValueError as error:
                raise marshmallow.ValidationError(str(error), "cron") from None
        if data.get("repeat") is not None and data.get("time") is None:
            raise marshmallow.ValidationError("a daily or weekly repeat needs its time of day (HH:MM)", "time")
        if data.get("repeat") == "weekly" and not data.get("weekdays"):
            raise marshmallow.ValidationError("a weekly repeat needs its weekdays (mon ... sun)", "weekdays")


class DeviceStateTrigger(Comparison):
    """Fires when the property crosses the threshold (was not past it, now is) or starts to equal."""


class EventTrigger(Strict):
    event = fields.String(required=True, validate=validate.Regexp(
        EVENT_NAME, error="an event name is 1-64 letters, digits, _ . or -"))


class ManualTrigger(Strict):
    """Only `POST /automation/rules/{id}/trigger` (or a scene) runs it."""


TRIGGERS: dict[str, type[marshmallow.Schema]] = {
    "time": TimeTrigger, "device_state": DeviceStateTrigger, "event": EventTrigger, "manual": ManualTrigger}


# ---------------------------------------------------------------- conditions

class TimeWindowCondition(Strict):
    """True between `start` and `end` (a window may pass midnight) in the zone, on the weekdays."""
    type = fields.String(required=True)
    start = fields.String(required=True, validate=_clock)
    end = fields.String(required=True, validate=_clock)
    weekdays = _weekdays()
    timezone = fields.String(load_default=None, validate=_timezone)


class DeviceStateCondition(Comparison):
    """True when the device's property is now above / below / equal to the value."""
    type = fields.String(required=True)


class GroupCondition(Strict):
    """`all`: every inner condition holds; `any`: at least one does."""
    type = fields.String(required=True)
    conditions = fields.List(fields.Dict(), required=True, validate=validate.Length(min=1, max=MAX_CONDITIONS))


CONDITIONS: dict[str, type[marshmallow.Schema]] = {
    "time_window": TimeWindowCondition, "device_state": DeviceStateCondition,
    "all": GroupCondition, "any": GroupCondition}


# ---------------------------------------------------------------- actions

class NotifyAction(Strict):
    type = fields.String(required=True)
    title = fields.String(required=True, validate=validate.Length(min=1, max=200))
    body = fields.String(load_default="", validate=validate.Length(max=4000))
    level = fields.String(load_default="info", validate=validate.OneOf(NOTIFY_LEVELS))


class DeviceAction(Strict):
    """The IoT service's operate body, flattened beside the device id."""
    type = fields.String(required=True)
    device_id = fields.String(required=True, validate=validate.Length(min=1, max=128))
    action = fields.String(required=True, validate=validate.OneOf(DEVICE_ACTIONS))
    property = fields.String(load_default=None, validate=validate.Length(min=1, max=64))
    properties = fields.Dict(keys=fields.String(), load_default=None,
                             validate=[validate.Length(min=1, max=20), finite_numbers_only])
    value = fields.Raw(load_default=None, validate=finite_numbers_only)

    @validates_schema
    def operation_shape(self, data: dict, **_: Any) -> None:
        if data["action"] == "switch":
            if not isinstance(data.get("value"), bool) or data.get("property") or data.get("properties"):
                raise marshmallow.ValidationError("a switch takes value true or false and nothing else", "value")
        elif data.get("properties") is not None:
            if data.get("property") is not None or data.get("value") is not None:
                raise marshmallow.ValidationError("give either properties, or property with value", "properties")
        elif data.get("property") is None or data.get("value") is None:
            raise marshmallow.ValidationError("a set takes property and value, or properties", "property")


class MessageAction(Strict):
    type = fields.String(required=True)
    text = fields.String(required=True, validate=validate.Length(min=1, max=8000))
    session_id = fields.String(load_default=None, validate=[
        validate.Length(min=1, max=128),
        validate.Regexp(r"^[A-Za-z0-9_.:\-]+\Z", error="use letters, digits and _ . : - only")])


class SceneAction(Strict):
    type = fields.String(required=True)
    scene_id = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{32}\Z",
                                                                     error="a scene id is 32 hex digits"))


class HttpAction(Strict):
    type = fields.String(required=True)
    url = fields.Url(required=True, schemes={"http", "https"}, require_tld=False)
    method = fields.String(load_default="POST", validate=validate.OneOf(HTTP_METHODS))
    headers = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=100)),
                          values=fields.String(validate=validate.Length(max=2000)),
                          load_default=dict, validate=validate.Length(max=20))
    body = fields.Raw(load_default=None)


class AssistantAction(Strict):
    type = fields.String(required=True)
    prompt = fields.String(required=True, validate=validate.Length(min=1, max=4000))
    session_id = fields.String(load_default=None, validate=[
        validate.Length(min=1, max=128),
        validate.Regexp(r"^[A-Za-z0-9_.:\-]+\Z", error="use letters, digits and _ . : - only")])
    deliver = fields.List(fields.String(validate=validate.OneOf(DELIVERIES)),
                          load_default=lambda: ["session", "notification"], validate=validate.Length(min=1, max=2))


ACTIONS: dict[str, type[marshmallow.Schema]] = {
    "notify": NotifyAction, "device": DeviceAction, "message": MessageAction, "scene": SceneAction,
    "http": HttpAction, "assistant": AssistantAction}


# ---------------------------------------------------------------- checking a whole rule

def _unknown(kind: str, given: object, known: dict, where: str) -> BadRequest:
    names = ", ".join(known)
    return BadRequest(f"Unknown {kind} type {given!r} in {where}; known types: {names}.",
                      error_type=f"unknown_{kind.replace(' ', '_')}_type",
                      hint=f"Use one of: {names} (docs/automation.md).", extra={"known_types": list(known)})


def _root(where: str) -> str:
    """`actions` of `actions[2]`, `conditions` of `conditions.conditions[0]`."""
    return where.split("[")[0].split(".")[0]


def _typed(kind: str, value: Any, known: dict, where: str) -> dict:
    if not isinstance(value, dict):
        raise BadRequest(f"Invalid {where}: each {kind} is an object with a type.",
                         error_type=f"invalid_{_root(where)}",
                         hint="docs/automation.md lists each type with its fields and an example.")
    kind_name = value.get("type")
    if kind_name not in known:
        if not isinstance(kind_name, str) or not kind_name:
            raise BadRequest(f"Invalid {where}: a {kind} needs a type; known types: {', '.join(known)}.",
                             error_type=f"invalid_{_root(where)}",
                             hint="docs/automation.md lists each type with its fields and an example.")
        raise _unknown(kind, kind_name, known, where)
    return load(known[kind_name](), value, where)


def check_trigger(trigger_type: str, config: Any) -> dict:
    if trigger_type not in TRIGGERS:
        raise _unknown("trigger", trigger_type, TRIGGERS, "trigger_type")
    if not isinstance(config, dict):
        raise BadRequest("Invalid trigger_config: it is an object.", error_type="invalid_trigger_config",
                         hint="docs/automation.md lists each trigger type with its fields.")
    return load(TRIGGERS[trigger_type](), config, "trigger_config")


def _check_condition(value: Any, where: str, depth: int) -> dict:
    loaded = _typed("condition", value, CONDITIONS, where)
    if loaded["type"] in ("all", "any"):
        if depth >= MAX_CONDITION_DEPTH:
            raise BadRequest(f"Invalid {where}: conditions nest at most {MAX_CONDITION_DEPTH} deep.",
                             error_type="invalid_conditions", hint="Flatten the all/any groups.")
        loaded["conditions"] = [_check_condition(inner, f"{where}.conditions[{index}]", depth + 1)
                                for index, inner in enumerate(loaded["conditions"])]
    return loaded


def check_conditions(value: Any) -> dict | None:
    """`{}` (or null) means always; a list means all of them; otherwise one condition object."""
    if value is None or value == {} or value == []:
        return None
    if isinstance(value, list):
        value = {"type": "all", "conditions": value}
    return _check_condition(value, "conditions", 1)


def action_list(value: Any) -> list:
    """A rule's actions: a list of action objects, or one action object alone."""
    return [value] if isinstance(value, dict) else value if isinstance(value, list) else []


def check_actions(value: Any, *, allow_empty: bool = False) -> list[dict]:
    if not isinstance(value, (list, dict)) or (not allow_empty and not action_list(value)):
        raise BadRequest("Invalid actions: a list of action objects (or one action object) with at least one action.",
                         error_type="invalid_actions", hint="docs/automation.md lists each action type.")
    actions = action_list(value)
    if len(actions) > MAX_ACTIONS:
        raise BadRequest(f"Invalid actions: at most {MAX_ACTIONS} actions.", error_type="invalid_actions",
                         hint="Split the work over several rules or a scene.")
    return [_typed("action", action, ACTIONS, f"actions[{index}]") for index, action in enumerate(actions)]


def scene_ids_of(actions: list[dict]) -> list[str]:
    return [action["scene_id"] for action in actions if action["type"] == "scene"]


def event_name_ok(name: str) -> bool:
    return re.match(EVENT_NAME, name) is not None


def compare(value: Any, comparison: dict) -> bool:
    """Whether `value` is above / below / equal to the comparison's value."""
    if comparison.get("equals") is not None:
        expected = comparison["equals"]
        if isinstance(expected, bool) or isinstance(value, bool):
            return value is expected if isinstance(value, bool) and isinstance(expected, bool) else False
        if isinstance(expected, (int, float)) and isinstance(value, (int, float)):
            return float(value) == float(expected)
        return bool(value == expected)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if comparison.get("above") is not None:
        return bool(float(value) > comparison["above"])
    return bool(float(value) < comparison["below"])


def crossed(change: dict, comparison: dict) -> bool:
    """A device change that makes the comparison true when it was not before (`from` → `to`)."""
    return compare(change.get("to"), comparison) and not compare(change.get("from"), comparison)

