"""Files and image analysis: two plugins in one package.

- `files`: upload (streamed, sniffed, hashed), list, get, download with byte ranges,
  thumbnails and delete, on the core's blob storage (a local directory or S3/MinIO). Offers the
  `files` service (a `FileService`) to other plugins, e.g. chat attachments by `file_id`.
- `images`: `POST /api/v1/images/analyze` and `GET /api/v1/images/analyze/{file_id}`,
  described by the AI core's vision model when one is routed, else locally.

See docs/files.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from .analysis import ImageAnalysis, VisionClient
from .service import FileService


class FilesPlugin(Plugin):
    name = "files"
    uses = ("database", "blobs")
    description = "Uploads, downloads and thumbnails on local disk or S3"

    def setup(self, registrar: Registrar) -> None:
        settings = registrar.settings
        service = FileService(registrar.context, int(settings.get("image_workers") or 0))
        registrar.migrations("plugins.files")
        registrar.routes(service.routes())
        registrar.lifespan(service.lifespan)
        registrar.provide("files", service)


class ImagesPlugin(Plugin):
    name = "images"
    depends = ("files",)
    uses = ("database", "blobs")
    description = "Image analysis: measurements, EXIF and a vision-model or local description"

    def setup(self, registrar: Registrar) -> None:
        context = registrar.context
        timeout = float(registrar.settings.get("vision_timeout") or 60)
        analysis = ImageAnalysis(context, context.services.require("files"), VisionClient(context, timeout))
        registrar.routes(analysis.routes())


files_plugin = FilesPlugin()
images_plugin = ImagesPlugin()
