"""`[plugins.plugin_manager]` (docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting


@dataclass(frozen=True, kw_only=True)
class PluginManagerSettings(PluginSettings):
    services_host: str = setting(fields.String(load_default="127.0.0.1", validate=validate.Length(min=1), metadata={
        "description": "Where the services of the service table answer (each on its own port), "
                       "unless their *_URL variable (GATEWAY_URL, AI_CORE_URL...) names another address."}))
    introspection_timeout: float = setting(fields.Float(load_default=2.0, validate=validate.Range(min=0, min_inclusive=False),
                                         metadata={"description": "Seconds a service may take to say what it "
                                                                  "loaded before it is shown as down."}))
    restart_timeout: float = setting(fields.Float(load_default=120.0, validate=validate.Range(min=0, min_inclusive=False),
                                   metadata={"description": "Seconds the console may take to restart a service "
                                                            "after a plugin was enabled or disabled there."}))
