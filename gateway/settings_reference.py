"""Plugin settings described from their `settings_class`, for `gateway plugins` and the
Markdown reference in docs/configuration.md. The schemas hold each default and description
once; everything a person reads about `[plugins.<name>]` is generated from them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

import marshmallow
from marshmallow import fields, validate

from .plugin_settings import PluginSettings
from .plugins import Plugin

REFERENCE_COMMAND = "gateway plugins --reference --distribution assistant-gateway > docs/configuration.md"

_TYPE_NAMES: tuple[tuple[type[fields.Field], str], ...] = (
    (fields.Boolean, "boolean"), (fields.Integer, "integer"), (fields.Float, "number"),
    (fields.String, "string"), (fields.Dict, "table"),
)


@dataclass(frozen=True)
class SettingDescription:
    key: str
    type: str
    default: Any
    description: str

    def default_toml(self) -> str:
        return toml_value(self.default)


def describe_settings(plugin: Plugin) -> list[SettingDescription]:
    """Each key of the plugin's `[plugins.<name>]` table; a plugin without a schema has only
    `enabled`."""
    schema = (plugin.settings_class or PluginSettings).schema()
    return [SettingDescription(key=name, type=type_name(field), default=default_of(field),
                               description=str(field.metadata.get("description", "")))
            for name, field in schema.fields.items()]


def type_name(field: fields.Field) -> str:
    if isinstance(field, fields.List):
        name = f"list of {type_name(field.inner)}s"
    else:
        name = next((text for kind, text in _TYPE_NAMES if isinstance(field, kind)),
                    type(field).__name__.lower())
    limits = [constraint(validator) for validator in field.validators]
    return ", ".join([name, *filter(None, limits)])


def constraint(validator: Any) -> str:
    if isinstance(validator, validate.Range):
        low = (f"{'>=' if validator.min_inclusive else '>'} {validator.min}"
               if validator.min is not None else "")
        high = (f"{'<=' if validator.max_inclusive else '<'} {validator.max}"
                if validator.max is not None else "")
        return " and ".join(filter(None, [low, high]))
    if isinstance(validator, validate.OneOf):
        return "one of " + ", ".join(toml_value(choice) for choice in validator.choices)
    return ""


def default_of(field: fields.Field) -> Any:
    """The value used when the key is left out; None when there is none."""
    default = field.load_default
    if default is marshmallow.missing:
        return None
    return default() if callable(default) else default


def toml_value(value: Any) -> str:
    """`value` as it is written in a TOML file."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {toml_value(item)}" for key, item in value.items()) + "}"
    return str(value)


def markdown_reference(plugins: Iterable[Plugin]) -> str:
    """docs/configuration.md: one table of settings per plugin, in name order."""
    lines = [
        "# Configuration reference: plugin settings",
        "",
        "Generated from each plugin's `settings_class` (`gateway.plugin_settings.PluginSettings`) by",
        "",
        f"    {REFERENCE_COMMAND}",
        "",
        "Do not edit it by hand: change the schema and run that command again "
        "(`tests/core/test_settings.py` fails while this file is stale). "
        "`gateway plugins --reference` alone describes every plugin installed where it runs, "
        "third parties' included.",
        "",
        "A plugin reads its settings from the `[plugins.<name>]` table of the configuration: "
        "`conf/default.toml`, or the file named by `GATEWAY_CONFIG` (read after it). "
        "The defaults live in the schemas, not in those files. "
        "An unknown key or a value of the wrong type stops the service at start-up with a message "
        "naming `plugins.<name>.<key>`. The core's own sections (`[core]`, `[database]`, ...) are "
        "described in `conf/default.toml` and the README.",
        "",
        "```toml",
        "[plugins.auth]",
        "rate_limit_per_minute = 10",
        "```",
    ]
    for plugin in sorted(plugins, key=lambda plugin: plugin.name):
        lines += ["", f"## `[plugins.{plugin.name}]`", ""]
        if plugin.description:
            lines += [plugin.description.rstrip(".") + ".", ""]
        if plugin.environment:
            variables = ", ".join(f"`{name}` (`{dotted}`)" for name, (dotted, _) in sorted(plugin.environment.items()))
            lines += [f"Environment variables of this plugin: {variables}.", ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for setting in describe_settings(plugin):
            lines.append(f"| `{setting.key}` | {setting.type} | `{setting.default_toml()}` | "
                         f"{setting.description.replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"
