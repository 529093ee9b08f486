"""A gateway with the files and images plugins (and the AI core client the images plugin uses)
on real PostgreSQL, with blobs either in a local directory or in S3 (moto's server on loopback,
which speaks the S3 wire protocol)."""
from __future__ import annotations

import pytest

from gateway.app import create_app
from gateway.context import CONTEXT
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.files import files_plugin, images_plugin
from tests.support.identities import TestIdentitiesPlugin
from tests.support.servers import free_port



@pytest.fixture
def make_files_client(aiohttp_client, make_config, database_url, request):
    """Builds a client for the files app; `backend` is "local" or "s3"; `overrides` add config."""
    async def build(backend: str = "local", overrides: dict | None = None):
        settings = {"database.url": database_url,
                    # A closed port: no AI core, so analyses are described locally.
                    "peers.ai_core_url": f"http://127.0.0.1:{free_port()}"}
        if backend == "s3":
            endpoint = request.getfixturevalue("s3_endpoint")
            settings.update({"blobs.s3_endpoint": endpoint, "blobs.s3_bucket": f"files-{free_port()}",
                             "blobs.s3_access_key": "test", "blobs.s3_secret_key": "test"})
        settings.update(overrides or {})
        app = create_app("gateway", make_config(settings),
                         plugins=[TestIdentitiesPlugin(), files_plugin, ai_core_client_plugin, images_plugin])
        return await aiohttp_client(app)
    return build


@pytest.fixture(params=["local", "s3"])
async def files_client(request, make_files_client):
    return await make_files_client(request.param)


@pytest.fixture
async def local_client(make_files_client):
    return await make_files_client("local")


def blobs_of(client):
    return client.server.app[CONTEXT].blobs
