"""`[plugins.webhooks]` (docs/configuration.md)."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings


class WebhooksSettings(PluginSettings):
    ai_timeout = fields.Float(load_default=120.0, validate=validate.Range(min=0, min_inclusive=False), metadata={
        "description": "Seconds to wait for the whole reply to a webhook message."})
