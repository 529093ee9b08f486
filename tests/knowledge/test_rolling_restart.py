"""A rolling restart of a gateway run as one process on the embedded vector store, through the
console's API: the replacement starts beside the old process (SO_REUSEPORT) while the old one
holds the store's directory, serves at once, and takes the store over when the old one has
drained and closed it (gateway/edge_engine.py). The health check answers all along, and a search
answers the same before, during (one the replacement takes waits for the store) and after."""
from __future__ import annotations

import asyncio
import re
import shutil
import time

import aiohttp
import psutil
import pytest

from console.app import create_console_app
from console.typedefs import SUPERVISOR
from gateway.app import create_app
from gateway.config import PROJECT_ROOT
from gateway.embedded_bus import redis_server_binary
from gateway.services import load_services
from plugins.auth import tokens_plugin
from tests.chat.test_workers import toml_document
from tests.support.servers import NO_REDIS_SERVER, free_port

from .conftest import ALICE, API, bearer

pytestmark = pytest.mark.slow

SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {port}
plugins = ["auth_tokens", "files", "knowledge"]
health = "/api/v1/health"
workers = {workers}
"""
NOTES = {
    "Dentist": "My dental appointment was moved to Thursday morning.",
    "Bread": "To bake bread, knead the dough and let it rise for two hours.",
    "Revenue": "Our quarterly revenue grew by twelve percent thanks to strong sales in Asia.",
}
QUESTION = "which day is my tooth doctor visit"


@pytest.fixture
async def console(make_config, database_url, tmp_path, monkeypatch, aiohttp_client):
    """The console's API over a service table of one gateway process (knowledge on the embedded
    store), and the headers of a user whose token that gateway accepts."""
    port = free_port()
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text(SERVICES.format(port=port, workers=1))
    gateway_config = make_config({"database.url": database_url})
    (conf / "gateway.toml").write_text(toml_document(gateway_config._values))
    monkeypatch.setenv("GATEWAY_CONF_DIR", str(conf))
    monkeypatch.setenv("GATEWAY_CONFIG", str(conf / "gateway.toml"))
    for name in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL"):
        monkeypatch.delenv(name, raising=False)
    # Tokens from an in-process app on the same secrets (it opens no vector store).
    issuer = create_app("gateway", gateway_config, plugins=[tokens_plugin])
    await aiohttp_client(issuer)
    app = create_console_app(make_config({"console.health_timeout": 180, "console.stop_timeout": 30}),
                             specs=load_services())
    client = await aiohttp_client(app)
    client.gateway_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    client.headers = bearer(issuer, ALICE)  # type: ignore[attr-defined]
    client.services = lambda workers: (conf / "services.toml").write_text(  # type: ignore[attr-defined]
        SERVICES.format(port=port, workers=workers))
    yield client
    await client.post("/api/services/stop-all")


async def search(http: aiohttp.ClientSession, console) -> tuple[int, list[str], float]:
    """One search on a connection of its own (either process may accept it): its status, the
    titles found, and how long it took."""
    started = time.monotonic()
    async with http.post(f"{console.gateway_url}{API}/knowledge/search", json={"query": QUESTION, "limit": 3},
                         headers={**console.headers, "Connection": "close"}) as answer:
        body = await answer.json()
        titles = [chunk["document_title"] for chunk in body.get("chunks", [])]
        return answer.status, titles, time.monotonic() - started


@pytest.mark.parametrize("workers", [1, 2], ids=["to-one-process", "to-two-workers"])
async def test_a_rolling_restart_of_one_process_hands_the_vector_store_over(console, workers):
    """To one process again, or to a parent of two workers (the service table's `workers`
    changed): its workers start while the old process holds the store, which the parent takes over."""
    if workers > 1 and redis_server_binary() is None:
        pytest.skip(f"the workers' embedded bus: {NO_REDIS_SERVER}")
    started = await console.post("/api/services/gateway/start")
    assert started.status == 200, await started.text()
    old_pid = (await started.json())["pid"]
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{console.gateway_url}{API}/knowledge/bases", json={"name": "Notes"},
                             headers=console.headers) as answer:
            assert answer.status == 201, await answer.text()
            kb_id = (await answer.json())["id"]
        for title, content in NOTES.items():
            async with http.post(f"{console.gateway_url}{API}/knowledge/bases/{kb_id}/documents",
                                 json={"title": title, "content": content}, headers=console.headers) as answer:
                assert answer.status == 201 and (await answer.json())["index_status"] == "ready"
        status, before, _ = await search(http, console)
        assert status == 200 and before[0] == "Dentist" and len(before) == 3

        health: list[int | str] = []
        searches: list[tuple[int, list[str], float]] = []
        polling = True

        async def poll_health() -> None:
            while polling:
                try:
                    async with http.get(f"{console.gateway_url}{API}/health",
                                        headers={"Connection": "close"}) as answer:
                        health.append(answer.status)
                except aiohttp.ClientError as error:
                    health.append(type(error).__name__)
                await asyncio.sleep(0.02)

        async def poll_search() -> None:
            while polling:
                try:
                    searches.append(await search(http, console))
                except aiohttp.ClientError as error:
                    searches.append((0, [type(error).__name__], 0.0))
                await asyncio.sleep(0.05)

        console.services(workers)
        pollers = [asyncio.ensure_future(poll_health()), *(asyncio.ensure_future(poll_search()) for _ in range(3))]
        try:
            rolled = await console.post("/api/services/gateway/rolling-restart")
            assert rolled.status == 200, await rolled.text()
            record = await rolled.json()
            assert record["pid"] != old_pid and record["status"] == "running"
            assert ("--worker-index" in " ".join(" ".join(child.cmdline()) for child in
                                                 psutil.Process(record["pid"]).children())) is (workers > 1)
            status, right_after, _ = await search(http, console)
            await asyncio.sleep(0.5)
        finally:
            polling = False
            await asyncio.gather(*pollers)
            log = "\n".join((await console.server.app[SUPERVISOR].logs.get("gateway").tail(400)).lines)
            print("\n".join(line for line in log.splitlines()
                            if any(word in line for word in ("vector", "rolling", "replace", "worker", "Error"))))

    assert status == 200 and right_after == before
    assert len(health) > 20 and set(health) == {200}, health
    assert len(searches) > 10 and all(answer[:2] == (200, before) for answer in searches), searches
    assert "is held by another process (the one this replaces)" in log
    taken_over = re.search(r"vector directory \S+ taken over after ([\d.]+) s", log)
    assert taken_over, log[-3000:]
    assert "still in use" not in log
    waited = float(taken_over.group(1))
    slowest = max(answer[2] for answer in searches)
    print(f"the replacement waited {waited:.2f} s for the store; the slowest search during the "
          f"restart took {slowest:.2f} s ({len(searches)} searches)")
    assert waited < 30
