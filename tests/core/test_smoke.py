from gateway.app import create_app
from tests.core.sample_plugin import SamplePlugin


async def test_plugin_with_migrations_serves_requests(aiohttp_client, config):
    plugin = SamplePlugin()
    client = await aiohttp_client(create_app("sample-service", config, plugins=[plugin]))
    assert plugin.events[:1] == ["start"]
    response = await client.post("/api/v1/notes", json={"text": "hello"})
    assert response.status == 201
    response = await client.get("/api/v1/notes")
    assert (await response.json())["notes"] == [{"id": 1, "text": "hello"}]
    response = await client.post("/api/v1/notes", json={"text": ""})
    assert response.status == 400
    body = await response.json()
    assert body["errorType"] == "validation_error" and "text" in body["error"]
    response = await client.get("/api/v1/boom")
    assert response.status == 500
    assert set(await response.json()) == {"error", "errorType", "hint"}
