"""A service table of its own for the plugin manager's tests (a temporary conf directory named
by GATEWAY_CONF_DIR, inherited by the services the console starts), and one fixed service
credential for the test and those services."""
from __future__ import annotations

import shutil

import pytest

from gateway.config import PROJECT_ROOT
from gateway.services import ServiceSpec, load_services
from tests.console.conftest import write_service_table
from tests.support.servers import free_port

SERVICE_TOKEN = "test-service-token"  # what make_config sets, given to the child processes too


@pytest.fixture
def plugin_table(tmp_path, monkeypatch):
    """`build(rows)` writes the service table (each row gets a free port) and returns its specs."""
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    monkeypatch.setenv("GATEWAY_CONF_DIR", str(conf))
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SERVICE_TOKEN", SERVICE_TOKEN)
    # No console of this machine's (another one may run on 9090) is ever asked to restart anything.
    monkeypatch.setenv("CONSOLE_PORT", str(free_port()))

    def build(rows: list[dict]) -> list[ServiceSpec]:
        write_service_table(conf, [{"port": free_port(), "plugins": [], **row} for row in rows])
        return load_services()

    return build
