"""Files and image analysis: two plugins in one package.

- `files`: upload (streamed, sniffed, hashed), list, get, download with byte ranges,
  thumbnails and delete, on the core's blob storage (a local directory or S3/MinIO). Offers the
  `FILES` contract (contract.py) to other plugins, e.g. chat attachments by `file_id`.
- `images`: `POST /api/v1/images/analyze` and `GET /api/v1/images/analyze/{file_id}`,
  described by the AI core's vision model when one is routed (through the `AI_CORE` client),
  else locally.

See docs/files.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from . import analysis, person_data
from .api import FILE_STORE, routes
from .contract import FILES
from .settings import FilesSettings
from .store import FileStore


class FilesPlugin(Plugin):
    name = "files"
    optional_depends = ("auth_tokens",)  # set up after it, to tell it what it keeps of a person
    uses = ("database", "blobs")
    description = "Uploads, downloads and thumbnails on local disk or S3"
    settings_class = FilesSettings

    def setup(self, registrar: Registrar[FilesSettings]) -> None:
        settings = registrar.settings
        files = FileStore(registrar.context, settings.image_workers)
        registrar.migrations("plugins.files")
        registrar.app_state(FILE_STORE, files)
        registrar.routes(routes)
        registrar.lifespan(files.lifespan)
        registrar.provide(FILES, files)
        person_data.register(registrar, files)


class ImagesPlugin(Plugin):
    name = "images"
    depends = ("files", "ai_core_client")
    uses = ("database", "blobs")
    description = "Image analysis: measurements, EXIF and a vision-model or local description"

    def setup(self, registrar: Registrar) -> None:
        # The same package: its handlers use the whole file store, under the files plugin's
        # FILE_STORE, not just the FILES contract.
        registrar.routes(analysis.routes)


files_plugin = FilesPlugin()
images_plugin = ImagesPlugin()
