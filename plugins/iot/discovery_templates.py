"""Home Assistant's simple value templates, read without Jinja (docs/iot.md, "MQTT").

Only the simple kind is read — `{{ value }}`, `{{ value_json.a.b }}`, `{{ value_json['a'] }}`
with `float`, `int`, `round(n)`, `lower`, `upper` filters — so a device's config is checked
once when discovered, and a payload becomes a value without running anyone's template code."""
from __future__ import annotations

import json
import math
import re
from typing import Any


class DiscoveryError(ValueError):
    """A config this adapter cannot use (said in the log, the device left out)."""


_TEMPLATE = re.compile(r"^\{\{\s*(.+?)\s*\}\}$", re.S)
_PATH_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([^'\"]+)['\"]\s*\]|\[\s*(\d+)\s*\]")


def render_value(template: str | None, payload: str) -> Any:
    """The value a simple Home Assistant value template yields for `payload`; None when the
    payload does not have it. A template beyond the simple kind is a DiscoveryError."""
    if not template:
        return payload
    match = _TEMPLATE.match(template.strip())
    if match is None:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    expression, *filters = [part.strip() for part in match.group(1).split("|")]
    value: Any
    if expression == "value":
        value = payload
    elif expression.startswith("value_json"):
        try:
            value = json.loads(payload)
        except ValueError:
            return None
        rest = expression[len("value_json"):]
        position = 0
        while position < len(rest):
            part = _PATH_PART.match(rest, position)
            if part is None:
                raise DiscoveryError(f"value template {template!r} is not a simple one")
            key = part.group(1) or part.group(2)
            if key is not None:
                value = value.get(key) if isinstance(value, dict) else None
            else:
                index = int(part.group(3))
                value = value[index] if isinstance(value, list) and index < len(value) else None
            position = part.end()
            if value is None:
                return None
    else:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    for name in filters:
        value = _filter(name, value, template)
        if value is None:
            return None
    return value


FILTERS = ("float", "int", "round", "lower", "upper", "string", "trim")


def check_template(template: str) -> None:
    """A DiscoveryError unless `template` is of the simple kind `render_value` reads."""
    match = _TEMPLATE.match(template.strip())
    if match is None:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    expression, *filters = [part.strip() for part in match.group(1).split("|")]
    if expression != "value":
        if not expression.startswith("value_json"):
            raise DiscoveryError(f"value template {template!r} is not a simple one")
        rest, position = expression[len("value_json"):], 0
        while position < len(rest):
            part = _PATH_PART.match(rest, position)
            if part is None:
                raise DiscoveryError(f"value template {template!r} is not a simple one")
            position = part.end()
    for name in filters:
        call = re.fullmatch(r"([a-z_]+)\s*(?:\(\s*([^)]*)\s*\))?", name)
        if call is None or call.group(1) not in FILTERS:
            raise DiscoveryError(f"value template {template!r} uses a filter this adapter does not read: {name}")


def _filter(name: str, value: Any, template: str) -> Any:
    call = re.fullmatch(r"([a-z_]+)\s*(?:\(\s*([^)]*)\s*\))?", name)
    if call is None:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    function, argument = call.group(1), call.group(2)
    try:
        if function == "float":
            return float(value)
        if function == "int":
            return int(float(value))
        if function == "round":
            return round(float(value), int(argument or 0))
        if function == "lower":
            return str(value).lower()
        if function == "upper":
            return str(value).upper()
        if function in ("string", "trim"):
            return str(value).strip()
    except (TypeError, ValueError, OverflowError):  # OverflowError: `int` of an infinite float
        return None
    raise DiscoveryError(f"value template {template!r} uses the filter {function!r}")


def render_command(template: str | None, value: Any) -> str:
    """A command payload: the value, or a simple command template with `{{ value }}` in it."""
    text = value if isinstance(value, str) else json.dumps(value)
    if not template:
        return text
    return re.sub(r"\{\{\s*value\s*\}\}", text, template)


def number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past any float
        return None
    return result if math.isfinite(result) else None
