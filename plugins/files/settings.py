"""`[plugins.files]` and `[plugins.images]` (docs/configuration.md)."""
from marshmallow import fields, validate

from gateway.plugins import PluginSettings


class FilesSettings(PluginSettings):
    image_workers = fields.Integer(load_default=0, validate=validate.Range(min=0), metadata={
        "description": "Threads for thumbnails and image analysis (0: min(4, CPUs))."})


class ImagesSettings(PluginSettings):
    vision_timeout = fields.Float(load_default=60.0, validate=validate.Range(min=0, min_inclusive=False), metadata={
        "description": "Seconds to wait for the AI core's description of an image."})
