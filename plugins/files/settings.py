"""`[plugins.files]` (docs/configuration.md). The images plugin has no settings of its own: how
long it waits for a description is the AI core client's `vision_timeout`."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting


@dataclass(frozen=True, kw_only=True)
class FilesSettings(PluginSettings):
    image_workers: int = setting(fields.Integer(load_default=0, validate=validate.Range(min=0), metadata={
        "description": "Threads for thumbnails and image analysis (0: min(4, CPUs))."}))
