"""Files and image analysis: two plugins in one package.

- `files`: upload (streamed, sniffed, hashed), list, get, download with byte ranges,
  thumbnails and delete, on the core's blob storage (a local directory or S3/MinIO). Offers the
  `FILES` contract (contract.py) to other plugins, e.g. chat attachments by `file_id`.
- `images`: `POST /api/v1/images/analyze` and `GET /api/v1/images/analyze/{file_id}`,
  described by the AI core's vision model when one is routed (through the `AI_CORE` client),
  else locally.

See docs/files.md."""
from __future__ import annotations

from typing import cast

from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import AI_CORE

from .analysis import ImageAnalysis
from .api import FILE_STORE, routes
from .contract import FILES
from .settings import FilesSettings
from .store import FileStore


class FilesPlugin(Plugin):
    name = "files"
    uses = ("database", "blobs")
    description = "Uploads, downloads and thumbnails on local disk or S3"
    settings_schema = FilesSettings

    def setup(self, registrar: Registrar) -> None:
        settings = registrar.settings
        files = FileStore(registrar.context, settings["image_workers"])
        registrar.migrations("plugins.files")
        registrar.app_state(FILE_STORE, files)
        registrar.routes(routes)
        registrar.lifespan(files.lifespan)
        registrar.provide(FILES, files)


class ImagesPlugin(Plugin):
    name = "images"
    depends = ("files", "ai_core_client")
    uses = ("database", "blobs")
    description = "Image analysis: measurements, EXIF and a vision-model or local description"

    def setup(self, registrar: Registrar) -> None:
        context = registrar.context
        # The same package: the images plugin uses the whole file store, not just the contract.
        files = cast(FileStore, context.contracts.require(FILES))
        analysis = ImageAnalysis(context, files, context.contracts.require(AI_CORE))
        registrar.routes(analysis.routes())


files_plugin = FilesPlugin()
images_plugin = ImagesPlugin()
