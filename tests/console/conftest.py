"""A service table of tiny services for the console tests: each runs the real
`python -m gateway serve --service ID` from this code base, with no plugins, so the tests do
not depend on any feature plugin. The table lives in a temporary conf directory named by
GATEWAY_CONF_DIR, which the child processes inherit."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gateway.config import PROJECT_ROOT
from gateway.services import ServiceSpec, load_services
from tests.support.servers import free_port


def write_service_table(directory: Path, rows: list[dict]) -> None:
    lines = []
    for row in rows:
        lines.append("[[service]]")
        for key, value in row.items():
            if isinstance(value, str):
                lines.append(f'{key} = "{value}"')
            elif isinstance(value, (list, tuple)):  # JSON's arrays of strings are TOML's too
                lines.append(f"{key} = {json.dumps(value)}")
            else:
                lines.append(f"{key} = {value}")
        lines.append("")
    (directory / "services.toml").write_text("\n".join(lines))


@pytest.fixture
def service_table(tmp_path, monkeypatch):
    """`build(rows)` writes a conf directory whose service table is `rows` (each gets a free
    port and no plugins unless given) and returns the loaded specs."""
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    monkeypatch.setenv("GATEWAY_CONF_DIR", str(conf))
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))

    def build(rows: list[dict]) -> list[ServiceSpec]:
        complete = [{"port": free_port(), "plugins": [], **row} for row in rows]
        write_service_table(conf, complete)
        return load_services()

    return build
