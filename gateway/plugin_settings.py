"""A plugin's settings, `[plugins.<name>]`: declared once as a frozen dataclass whose fields carry
their marshmallow declarations (type, default, validation, description), from which the schema
that checks the TOML and the configuration reference are built (gateway/plugins.py loads them,
gateway/settings_reference.py describes them)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

import marshmallow

# Where a settings class's field keeps its marshmallow declaration (`setting`).
SETTING_FIELD = "gateway.setting"


def setting(declaration: marshmallow.fields.Field) -> Any:
    """A key of a settings class, declared once: its marshmallow field (type, validation,
    description) checks the TOML value, and the field's `load_default` is the attribute's
    default. Typed `Any` so that the class annotation (`limit: int = setting(...)`) is what
    mypy sees."""
    default = declaration.load_default
    metadata = {SETTING_FIELD: declaration}
    if default is marshmallow.missing:
        raise TypeError("a setting needs a load_default: an unset key must still have a value")
    if callable(default):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


SettingsT = TypeVar("SettingsT", bound="PluginSettings", covariant=True)


@dataclass(frozen=True, kw_only=True)
class PluginSettings:
    """A plugin's `[plugins.<name>]` section: subclass it as a frozen dataclass whose
    attributes are declared with `setting(field)`, the field carrying its default
    (`load_default`) and a `metadata={"description": ...}`; the configuration reference in
    docs/configuration.md is generated from these (`gateway plugins --reference`). An unknown
    key or a value of the wrong type stops the service at start-up, naming the key; the plugin
    reads the values as attributes mypy checks (`registrar.settings.limit`)."""

    enabled: bool = setting(marshmallow.fields.Boolean(load_default=True, metadata={
        "description": "Whether services that list this plugin load it."}))

    @classmethod
    def schema(cls) -> marshmallow.Schema:
        """The marshmallow schema of the section, built from the settings' declarations."""
        return _settings_schema(cls)(unknown=marshmallow.RAISE)

    @classmethod
    def load(cls: type[SettingsT], raw: Mapping[str, Any]) -> SettingsT:
        return cls(**cls.schema().load(raw))


_SCHEMAS: dict[type[PluginSettings], type[marshmallow.Schema]] = {}


def _settings_schema(settings_class: type[PluginSettings]) -> type[marshmallow.Schema]:
    schema = _SCHEMAS.get(settings_class)
    if schema is None:
        declared = {item.name: item.metadata[SETTING_FIELD] for item in dataclasses.fields(settings_class)}
        schema = _SCHEMAS[settings_class] = marshmallow.Schema.from_dict(
            declared, name=f"{settings_class.__name__}Schema")
    return schema
