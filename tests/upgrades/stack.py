"""The services that keep records (the memory, IoT, AI core, platform bridge and gateway services),
built by the production factory from the service table and served on loopback ports in this
process, on one database and one DATA_DIR: what the upgrade fixture is made with
(make_fixture.py) and what the upgrade test starts on it (test_upgrade.py)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from aiohttp import web

from gateway.app import create_app
from gateway.config import Config
from gateway.services import get_service
from tests.support.servers import free_port

# In start order (each one's peers first). The voice service keeps nothing, the plugin
# manager only DATA_DIR/service-plugins.toml.
SERVICES = ("memory-service", "iot-debug-service", "ai-core", "platform-bridge", "gateway")
PEER_KEYS = {"memory-service": "peers.memory_service_url", "iot-debug-service": "peers.iot_service_url",
             "ai-core": "peers.ai_core_url", "platform-bridge": "peers.platform_bridge_url",
             "gateway": "peers.gateway_url"}
# The secrets of the fixture's DATA_DIR: test data, fixed so that the tokens it holds stay valid.
SECRETS = {
    "auth.admin_username": "admin",
    "auth.admin_password": "fixture-admin-password",
    "auth.jwt_secret": "fixture-jwt-secret-0123456789abcdef0123456789",
    "auth.service_token": "fixture-service-token",
    "auth.webhook_key": "fixture-webhook-key",
    "auth.registration_verify_code": "FIX123",
}


@dataclass
class Stack:
    urls: dict[str, str]
    runners: list[web.AppRunner] = field(default_factory=list)

    def url(self, service_id: str, path: str) -> str:
        return self.urls[service_id] + path


def stack_config(database_url: str, data_dir: Path, urls: dict[str, str], **overrides) -> Config:
    values = {
        "core.data_dir": str(data_dir),
        "database.url": database_url,
        **SECRETS,
        "auth.registration_enabled": True,
        "auth.chat_for_all_users": True,
        **{PEER_KEYS[service_id]: url for service_id, url in urls.items()},
        **overrides,
    }
    return Config.load(overrides=values, environ={})


@contextlib.asynccontextmanager
async def running_stack(database_url: str, data_dir: Path, **overrides) -> AsyncIterator[Stack]:
    """Every service of SERVICES started (its migrations run), stopped at the end."""
    ports = {service_id: free_port() for service_id in SERVICES}
    urls = {service_id: f"http://127.0.0.1:{port}" for service_id, port in ports.items()}
    config = stack_config(database_url, data_dir, urls, **overrides)
    stack = Stack(urls)
    try:
        for service_id in SERVICES:
            runner = web.AppRunner(create_app(service_id, config, spec=get_service(service_id)), access_log=None)
            stack.runners.append(runner)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", ports[service_id]).start()
        yield stack
    finally:
        for runner in reversed(stack.runners):
            await runner.cleanup()
