"""The database panel: port checks at the configured addresses (a real listener, and a port
nobody listens on), the embedded PostgreSQL of DATA_DIR (the test session's own, when embedded),
the memory table's row count from the real memory service, and the container stack on a machine
without a Docker engine."""
from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from console.app import create_console_app
from gateway.app import create_app
from gateway.services import ServiceSpec
from plugins.auth import tokens_plugin
from plugins.memory import plugin as memory_plugin
from tests.support.servers import free_port


def docker_engine_answers() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    return subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0


@pytest.fixture
async def listener():
    """Something listening on a loopback port, as a database server would."""
    server = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


async def test_database_status_checks_ports_the_embedded_server_and_the_memory_table(
        aiohttp_client, aiohttp_server, make_config, database_url, postgres_server, listener):
    memory_port = free_port()
    memory_config = make_config({"database.url": database_url})
    memory = await aiohttp_server(create_app("memory-service", memory_config, plugins=[tokens_plugin, memory_plugin]),
                                  port=memory_port)
    memory_client = await aiohttp_client(memory)
    for content in ("Dana plays cello", "Dana lives in Lyon"):
        response = await memory_client.post(
            "/api/v1/memories", json={"content": content, "user_id": "user_dana"},
            headers={"Authorization": "Bearer test-service-token"})
        assert response.status in (200, 201), await response.text()

    closed = free_port()
    overrides = {"vectors.qdrant_url": f"http://127.0.0.1:{listener}", "blobs.s3_endpoint": f"http://127.0.0.1:{closed}"}
    if postgres_server.source == "embedded":  # the tests' own embedded server is this DATA_DIR's
        overrides["core.data_dir"] = str(postgres_server.directory)
    console = await aiohttp_client(create_console_app(
        make_config(overrides), specs=[ServiceSpec(id="memory-service", name="memory service", port=memory_port)]))

    status = await console.get("/api/database/status")
    body = await status.json()
    assert status.status == 200, body
    ports = {check["name"]: check for check in body["ports"]}
    assert list(ports) == ["PostgreSQL", "Redis", "Qdrant", "MinIO", "NATS"]
    assert ports["Qdrant"] == {**ports["Qdrant"], "host": "127.0.0.1", "port": listener, "source": "QDRANT_URL",
                               "open": True}
    assert ports["MinIO"]["port"] == closed and ports["MinIO"]["open"] is False and ports["MinIO"]["latencyMs"] is None
    assert ports["MinIO"]["source"] == "S3_ENDPOINT" and ports["PostgreSQL"]["source"] == "default"
    assert body["memoryTable"] == {"available": True, "rows": 2}
    if postgres_server.source == "embedded":
        assert body["embedded"]["running"] is True and body["embedded"]["open"] is True
        assert body["online"] is True and body["source"] == "embedded" and body["port"] == body["embedded"]["port"]

    simple = await (await console.get("/api/db/status")).json()
    assert set(simple) == {"online", "source", "host", "port"}

    # The memory service stops: the row count says so, the checks still answer.
    await memory.close()
    body = await (await console.get("/api/database/status")).json()
    assert body["memoryTable"]["available"] is False and body["memoryTable"]["errorType"] == "service_unreachable"


async def test_a_database_url_decides_what_online_means(aiohttp_client, make_config, listener):
    console = await aiohttp_client(create_console_app(
        make_config({"database.url": f"postgresql://u:secret@127.0.0.1:{listener}/db"}), specs=[]))
    assert await (await console.get("/api/db/status")).json() == {
        "online": True, "source": "DATABASE_URL", "host": "127.0.0.1", "port": listener}


@pytest.mark.skipif(docker_engine_answers(), reason="a Docker engine answers here: the stack would really start")
async def test_container_actions_say_clearly_that_docker_is_missing(aiohttp_client, make_config):
    console = await aiohttp_client(create_console_app(make_config(), specs=[]))
    for action in ("start", "stop", "restart"):
        response = await console.post(f"/api/db/{action}")
        body = await response.json()
        assert response.status == 503 and body["errorType"] == "docker_unavailable", body
        assert "Docker" in body["error"] and body["hint"]
