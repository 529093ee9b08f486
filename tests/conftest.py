"""Shared fixtures: real PostgreSQL and Redis, a configuration isolated from the machine's
environment, and apps built with the production factory."""
from __future__ import annotations

import uuid
from typing import Callable

import pytest

from gateway.config import Config
from tests.support.servers import NoRedisServer, PostgresForTests, RedisForTests, free_port

TEST_ADMIN_PASSWORD = "admin-test-password"


def pytest_asyncio_loop_factories(config, item):
    """Every asynchronous test runs on the loop the services run on (`core.event_loop`)."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresForTests()
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_server():
    try:
        server = RedisForTests()
    except NoRedisServer as missing:
        pytest.skip(str(missing))
    yield server
    server.close()


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3-protocol server (moto's server mode) on a loopback port."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def database_url(postgres_server) -> str:
    """A fresh, empty database for this test, dropped afterwards."""
    name = postgres_server.create_database()
    yield postgres_server.database_url(name)
    postgres_server.drop_database(name)


@pytest.fixture
def redis_url(redis_server) -> str:
    return redis_server.url


@pytest.fixture
def bus_prefix() -> str:
    """Keys and channels of one test never meet another's on a shared Redis."""
    return f"test-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
def make_config(tmp_path) -> Callable[..., Config]:
    """Configuration for a test: DATA_DIR in tmp_path, fixed secrets, the machine's environment
    ignored. Keyword arguments are dotted overrides, e.g. `**{"database.url": url}`."""
    def build(overrides: dict | None = None, environ: dict | None = None) -> Config:
        base = {
            "core.data_dir": str(tmp_path / "data"),
            "auth.admin_username": "admin",
            "auth.admin_password": TEST_ADMIN_PASSWORD,
            "auth.jwt_secret": "test-jwt-secret-" + "x" * 32,
            "auth.service_token": "test-service-token",
            "plugins.webhooks.webhook_key": "test-webhook-key",
            "auth.registration_verify_code": "ABC123",
            # The fake model providers of the tests listen on loopback: the operator's allowance
            # for a local inference server (tests of the egress policy set their own).
            "fetch.model_hosts": ["127.0.0.1"],
        }
        base.update(overrides or {})
        return Config.load(overrides=base, environ=environ or {})
    return build


@pytest.fixture
def config(make_config, database_url) -> Config:
    """A configuration on a fresh database and the in-process bus."""
    return make_config({"database.url": database_url})
