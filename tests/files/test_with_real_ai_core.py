"""Image analysis against the real AI core service (ai_core plugin with the token plugin, on a
loopback port), whose vision route points at the fake provider (tests/support), which speaks the
OpenAI-compatible streaming chat-completions protocol with image inputs."""
import aiohttp

from gateway.app import create_app
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from tests.files import samples
from tests.files.test_files_api import ALICE, upload
from tests.support.fake_openai import serve_fake_provider

SERVICE = {"Authorization": "Bearer test-service-token"}


async def test_analysis_described_by_the_real_ai_core(aiohttp_server, make_config, database_url,
                                                      make_files_client, postgres_server):
    provider = await serve_fake_provider(aiohttp_server)
    core_database = postgres_server.create_database()
    try:
        core_config = make_config({"database.url": postgres_server.database_url(core_database)})
        core_app = create_app("ai-core", core_config, plugins=[tokens_plugin, ai_core_plugin])
        core = await aiohttp_server(core_app)
        core_url = str(core.make_url("")).rstrip("/")
        await _post(core_url, "/api/v1/models/providers/vision-provider",
                    {"base_url": f"{provider.url}/vision/v1", "api_key": "key"})
        await _post(core_url, "/api/v1/models/models/vision-model",
                    {"name": "upstream-vision", "provider": "vision-provider", "tags": ["vision"]})

        client = await make_files_client("local", {"peers.ai_core_url": core_url})
        stored = await upload(client, samples.photo_jpeg(1600, 1200), "meadow.jpg")
        result = await (await client.get(f"/api/v1/images/analyze/{stored['id']}", headers=ALICE)).json()
        assert result["analyzed_by"] == "openai_vision", result
        assert result["description"] == "A green meadow under a pale blue sky."
        assert result["model"] == "vision-model"
        assert provider.images_seen == [(1024, 768)]
    finally:
        postgres_server.drop_database(core_database)


async def _post(base_url: str, path: str, body: dict) -> None:
    """Configure the AI core through its own admin API, as an operator would."""
    async with aiohttp.ClientSession() as session:
        async with session.post(base_url + path, json=body, headers=SERVICE) as response:
            assert response.status == 200, await response.text()
