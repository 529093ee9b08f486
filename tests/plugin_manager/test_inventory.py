"""The plugin manager's list, read in-process: the installed plugins with their versions and
services, a plugin that fails to import shown with its error, and `gateway plugins` (the CLI)
agreeing with it, both built by `gateway.inventory.installed_plugin_list`."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.app import create_app
from gateway.cli import main as gateway_cli
from gateway.services import load_services
from plugins.plugin_manager.schemas import InstalledPluginOut, PluginList

PEER = {"Authorization": "Bearer test-service-token"}


@pytest.fixture
def broken_distribution(tmp_path):
    """A real installed distribution (a dist-info on sys.path) whose plugin module imports a
    library that is not installed."""
    site = tmp_path / "site"
    info = site / "broken_example-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-example\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gateway.plugins]\nbroken_example = broken_example:plugin\n")
    (site / "broken_example.py").write_text("import a_library_nobody_installed\nplugin = None\n")
    sys.path.insert(0, str(site))
    try:
        yield
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("broken_example", None)


@pytest.fixture
async def manager(plugin_table, make_config, aiohttp_client):
    plugin_table([{"id": "weather-service", "plugins": ["weather_example"]},
                  {"id": "plugin-manager", "plugins": ["auth_tokens", "plugin_manager"]}])
    config = make_config({"console.port": int(os.environ["CONSOLE_PORT"])})
    return await aiohttp_client(create_app("plugin-manager", config))


async def test_the_list_shows_versions_services_and_a_broken_plugin(broken_distribution, manager):
    assert (await manager.get("/api/v1/plugins")).status == 401
    answer = await manager.get("/api/v1/plugins", headers=PEER)
    assert answer.status == 200
    body = PluginList().load(await answer.json())
    plugins = {plugin["name"]: plugin for plugin in body["plugins"]}
    weather = plugins["weather_example"]
    assert (weather["distribution"], weather["version"], weather["services"]) == (
        "gateway-weather-plugin-example", "0.3.1", ["weather-service"])
    # The weather service is not running: shown as down, not left out, and not an error.
    assert [(r["service"], r["state"], r["loaded"]) for r in weather["service_reports"]] == [
        ("weather-service", "down", None)]
    own = plugins["plugin_manager"]["service_reports"][0]
    assert own["loaded"] is True and {"method": "GET", "path": "/api/v1/plugins", "name": "plugin_manager.list"} in own["routes"]
    broken = plugins["broken_example"]
    assert (broken["distribution"], broken["version"]) == ("broken-example", "1.0")
    assert broken["error"] == {"type": "ModuleNotFoundError", "message": "No module named 'a_library_nobody_installed'"}
    assert plugins["auth"]["error"] is None and plugins["auth"]["services"] == []
    assert {service["id"]: service["state"] for service in body["services"]} == {
        "weather-service": "down", "plugin-manager": "running"}

    one = await manager.get("/api/v1/plugins/weather_example", headers=PEER)
    assert InstalledPluginOut().load(await one.json())["version"] == "0.3.1"
    missing = await manager.get("/api/v1/plugins/no_such_plugin", headers=PEER)
    assert missing.status == 404 and (await missing.json())["errorType"] == "unknown_plugin"

    # Enabling a broken plugin or one whose dependency the service lacks is refused.
    refused = await manager.post("/api/v1/plugins/broken_example/enable", json={"service": "weather-service"},
                                 headers=PEER)
    assert refused.status == 409 and (await refused.json())["errorType"] == "plugin_broken"
    refused = await manager.post("/api/v1/plugins/plugin_manager/enable", json={"service": "weather-service"},
                                 headers=PEER)
    body = await refused.json()
    assert refused.status == 409 and body["errorType"] == "dependency_missing" and body["dependency"] == "auth_tokens"
    assert "'auth_tokens'" in body["error"]
    unknown = await manager.post("/api/v1/plugins/weather_example/enable", json={"service": "nowhere"}, headers=PEER)
    assert unknown.status == 404 and (await unknown.json())["errorType"] == "unknown_service"
    bad = await manager.post("/api/v1/plugins/weather_example/enable", json={}, headers=PEER)
    assert bad.status == 400 and (await bad.json())["errorType"] == "validation_error"


async def test_without_a_console_the_change_is_written_and_the_restart_pending(manager):
    answer = await manager.post("/api/v1/plugins/weather_example/disable", json={"service": "weather-service"},
                                headers=PEER)
    body = await answer.json()
    assert answer.status == 200 and (body["changed"], body["plugins"]) == (True, [])
    assert body["restart"]["status"] == "pending" and "weather-service next starts" in body["restart"]["detail"]
    assert load_services(data_dir=Path(body["configuration"]).parent)[0].plugins == ()
    assert load_services()[0].plugins == ("weather_example",)  # the table itself is untouched
    # `gateway plugins` reads the same configuration: the weather plugin runs nowhere now.
    rows = {row["name"]: row for row in json.loads(CliRunner().invoke(gateway_cli, ["plugins", "--json"]).output)}
    assert rows["weather_example"]["services"] == []


async def test_the_cli_and_the_manager_agree(broken_distribution, manager):
    result = CliRunner().invoke(gateway_cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    cli = {(row["name"], row["distribution"], row["version"], tuple(row["services"]), row["enabled"],
            (row["error"] or {}).get("type")) for row in json.loads(result.output)}
    body = await (await manager.get("/api/v1/plugins", headers=PEER)).json()
    served = {(row["name"], row["distribution"], row["version"], tuple(row["services"]), row["enabled"],
               (row["error"] or {}).get("type")) for row in body["plugins"]}
    assert served == cli
    assert ("broken_example", "broken-example", "1.0", (), False, "ModuleNotFoundError") in cli
    assert ("weather_example", "gateway-weather-plugin-example", "0.3.1", ("weather-service",), True, None) in cli


async def test_a_service_elsewhere_is_found_through_its_url_variable(plugin_table, make_config, aiohttp_client,
                                                                      aiohttp_server):
    """The plugin manager finds a service as every caller does (gateway/peers.py): its *_URL
    variable, else its port of the table. The AI core runs on another port than the table's
    (another machine, say) and is reported running, not down."""
    from gateway.services import get_service

    plugin_table([{"id": "ai-core", "plugins": ["auth_tokens"]},
                  {"id": "plugin-manager", "plugins": ["auth_tokens", "plugin_manager"]}])
    elsewhere = await aiohttp_server(create_app("ai-core", make_config(), spec=get_service("ai-core")))
    assert elsewhere.port != get_service("ai-core").port
    url = f"http://127.0.0.1:{elsewhere.port}"
    config = make_config({"console.port": int(os.environ["CONSOLE_PORT"]), "peers.ai_core_url": url})
    manager = await aiohttp_client(create_app("plugin-manager", config))
    body = await (await manager.get("/api/v1/plugins", headers=PEER)).json()
    services = {service["id"]: service for service in body["services"]}
    assert (services["ai-core"]["state"], services["ai-core"]["url"]) == ("running", url)
    assert services["ai-core"]["plugins"] == ["auth_tokens"]

    # Without the variable, the table's port, where nothing answers: down.
    manager = await aiohttp_client(create_app("plugin-manager", make_config(
        {"console.port": int(os.environ["CONSOLE_PORT"])})))
    body = await (await manager.get("/api/v1/plugins", headers=PEER)).json()
    services = {service["id"]: service for service in body["services"]}
    assert (services["ai-core"]["state"], services["ai-core"]["url"]) == (
        "down", f"http://127.0.0.1:{get_service('ai-core').port}")
