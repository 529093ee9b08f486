"""`[plugins.admin]` (docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

POSITIVE = validate.Range(min=0, min_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class AdminSettings(PluginSettings):
    health_check_timeout: float = setting(fields.Float(load_default=5.0, validate=POSITIVE, metadata={
        "description": "Seconds a provider health check may take."}))
    fetch_models_timeout: float = setting(fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "Seconds fetching a provider's model list may take."}))
