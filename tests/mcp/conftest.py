"""Fixtures of the MCP tests: the sample MCP server (tests/mcp/sample_server.py, written with the
SDK) over stdio or streamable HTTP, the AI core and the gateway built by the production factory."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.app import create_app
from plugins.ai_core import plugin as ai_core_plugin
from plugins.ai_core.mcp_gateway import plugin as mcp_plugin
from plugins.auth import tokens_plugin
from tests.ai_core.conftest import ADMIN, ALICE, SERVICE, provider  # noqa: F401 - fixtures and credentials
from tests.support.servers import free_port

SAMPLE_SERVER = str(Path(__file__).with_name("sample_server.py"))
__all__ = ["ADMIN", "ALICE", "SERVICE", "SAMPLE_SERVER"]


@pytest.fixture
def make_ai_core(aiohttp_server, aiohttp_client, make_config, database_url):
    """The AI core (a real server on a loopback port) with `overrides` of its configuration; a
    client of it."""
    async def build(*extra_plugins, overrides: dict | None = None):
        config = make_config({"database.url": database_url, "auth.chat_for_all_users": True,
                              "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20,
                                                  "timezone": "UTC"}, **(overrides or {})})
        server = await aiohttp_server(create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin,
                                                                              *extra_plugins]))
        return await aiohttp_client(server)
    return build


@pytest.fixture
def make_gateway(aiohttp_client, make_config, database_url):
    """A gateway with the `mcp` plugin (and `extra_plugins`) asking the AI core at `ai_core_url`."""
    async def build(ai_core_url: str, *extra_plugins, overrides: dict | None = None, port: int | None = None):
        config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                              "auth.chat_for_all_users": True, **(overrides or {})})
        app = create_app("gateway", config, plugins=[tokens_plugin, *extra_plugins, mcp_plugin])
        return await aiohttp_client(app, server_kwargs={"port": port} if port else {})
    return build


@pytest.fixture
async def http_sample_server():
    """The sample server over streamable HTTP, in a child process; its port."""
    port = free_port()
    process = subprocess.Popen([sys.executable, SAMPLE_SERVER, "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()
                break
            except OSError:
                assert process.poll() is None, "the sample MCP server did not start"
                assert loop.time() < deadline, "the sample MCP server did not listen in time"
                await asyncio.sleep(0.2)
        yield port
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 10)


def stdio_server(name: str = "sample", **changes) -> dict:
    return {"name": name, "transport": "stdio", "command": sys.executable, "args": [SAMPLE_SERVER],
            "env": {"COLOR": "blue"}, "allowed_tools": ["add", "setting", "stop"], **changes}


async def server_state(client, name: str, headers: dict = ADMIN, path: str = "/api/v1/mcp-servers") -> dict:
    response = await client.get(path, headers=headers)
    body = await response.json()
    assert response.status == 200, body
    return next(server for server in body["servers"] if server["name"] == name)


async def until_state(client, name: str, state: str, *, timeout: float = 60.0, path: str = "/api/v1/mcp-servers",
                      restarts: int = 0) -> dict:
    """The server's entry once its state is `state` (with at least `restarts` restarts)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        server = await server_state(client, name, path=path)
        if server["status"]["state"] == state and server["status"]["restarts"] >= restarts:
            return server
        assert loop.time() < deadline, f"{name} stayed {server['status']}"
        await asyncio.sleep(0.2)


def url_of(client_or_server) -> str:
    server = getattr(client_or_server, "server", client_or_server)
    return str(server.make_url("")).rstrip("/")
