"""The frontend service's placeholder page, until the web client is built."""
from gateway.app import create_app
from plugins.frontend import plugin


async def test_placeholder_says_the_client_is_not_built_and_links_the_gateway_health(aiohttp_client,
                                                                                     make_config):
    config = make_config({"peers.gateway_url": "http://127.0.0.1:18080"})
    client = await aiohttp_client(create_app("frontend", config, plugins=[plugin]))
    response = await client.get("/")
    assert response.status == 200 and response.content_type == "text/html"
    page = await response.text()
    assert "not built yet" in page
    assert '<a href="http://127.0.0.1:18080/api/v1/health">' in page
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/api/v1/health")).status == 200
