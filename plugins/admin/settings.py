"""`[plugins.admin]` (docs/configuration.md)."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings

POSITIVE = validate.Range(min=0, min_inclusive=False)


class AdminSettings(PluginSettings):
    health_check_timeout = fields.Float(load_default=5.0, validate=POSITIVE, metadata={
        "description": "Seconds a provider health check may take."})
    fetch_models_timeout = fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "Seconds fetching a provider's model list may take."})
