"""Enabling and disabling a plugin for a service, end to end: a real console starts the plugin
manager and a service running the third-party weather plugin as `gateway serve` processes; the
manager reads what each one loaded from its introspection, refuses a change that would break a
dependency, writes DATA_DIR/service-plugins.toml and has the console restart the service,
which then runs without (and again with) the plugin. (Without a console, see test_inventory.py.)"""
from __future__ import annotations

import asyncio
import os
import tomllib
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from console.app import create_console_app
from tests.plugin_manager.conftest import SERVICE_TOKEN

pytestmark = pytest.mark.slow

PEER = {"Authorization": f"Bearer {SERVICE_TOKEN}"}


async def test_a_plugin_is_disabled_and_enabled_through_the_console(plugin_table, make_config):
    specs = plugin_table([{"id": "weather-service", "plugins": ["auth_tokens", "weather_example"]},
                          {"id": "plugin-manager", "plugins": ["auth_tokens", "plugin_manager"]},
                          {"id": "idle-service", "plugins": ["weather_example"]}])  # never started
    ports = {spec.id: spec.port for spec in specs}
    config = make_config({"console.stop_timeout": 5})
    console_port = int(os.environ["CONSOLE_PORT"])  # the port the manager (a child) asks the console on
    # Served as `python -m console serve` serves it: a request whose caller went away (the manager
    # asking for its own restart) still finishes, which the test server's runner would cancel.
    console = web.AppRunner(create_console_app(config, specs=specs))
    await console.setup()
    await web.TCPSite(console, "127.0.0.1", console_port).start()
    try:
        await exercise(console_port, ports)
    finally:
        await console.cleanup()


async def exercise(console_port: int, ports: dict[str, int]) -> None:
    manager_url = f"http://127.0.0.1:{ports['plugin-manager']}"
    weather_url = f"http://127.0.0.1:{ports['weather-service']}"
    async with aiohttp.ClientSession() as http:
        for service_id in ("weather-service", "plugin-manager"):
            started = await http.post(f"http://127.0.0.1:{console_port}/api/services/{service_id}/start")
            assert started.status == 200, await started.text()

        listed = await (await http.get(f"{manager_url}/api/v1/plugins", headers=PEER)).json()
        weather = next(plugin for plugin in listed["plugins"] if plugin["name"] == "weather_example")
        assert (weather["version"], weather["services"]) == ("0.3.1", ["weather-service", "idle-service"])
        reports = {report["service"]: report for report in weather["service_reports"]}
        assert (reports["weather-service"]["state"], reports["weather-service"]["loaded"]) == ("running", True)
        assert reports["weather-service"]["routes"] == [{"method": "GET", "path": "/api/v1/weather-example",
                                                         "name": "weather_example"}]
        assert (reports["idle-service"]["state"], reports["idle-service"]["loaded"]) == ("down", None)

        # plugin_manager depends on auth_tokens: disabling that is refused, naming it.
        refused = await http.post(f"{manager_url}/api/v1/plugins/auth_tokens/disable",
                                  json={"service": "plugin-manager"}, headers=PEER)
        body = await refused.json()
        assert refused.status == 409 and body["errorType"] == "dependency_in_use"
        assert body["dependents"] == ["plugin_manager"] and "'plugin_manager'" in body["error"]

        disabled = await http.post(f"{manager_url}/api/v1/plugins/weather_example/disable",
                                   json={"service": "weather-service"}, headers=PEER)
        body = await disabled.json()
        assert disabled.status == 200, body
        assert (body["changed"], body["enabled"], body["plugins"]) == (True, False, ["auth_tokens"])
        assert body["restart"]["status"] == "restarted", body["restart"]
        written = tomllib.loads(Path(body["configuration"]).read_text())
        assert written["service"]["weather-service"] == {"enable": [], "disable": ["weather_example"]}
        assert (await http.get(f"{weather_url}/api/v1/weather-example")).status == 404  # restarted without it
        introspection = await (await http.get(f"{weather_url}/api/v1/introspection", headers=PEER)).json()
        assert [plugin["name"] for plugin in introspection["plugins"]] == ["auth_tokens"]
        weather = await (await http.get(f"{manager_url}/api/v1/plugins/weather_example", headers=PEER)).json()
        assert weather["services"] == ["idle-service"]

        again = await (await http.post(f"{manager_url}/api/v1/plugins/weather_example/disable",
                                       json={"service": "weather-service"}, headers=PEER)).json()
        assert (again["changed"], again["restart"]["status"]) == (False, "not_needed")

        enabled = await http.post(f"{manager_url}/api/v1/plugins/weather_example/enable",
                                  json={"service": "weather-service"}, headers=PEER)
        body = await enabled.json()
        assert enabled.status == 200 and body["restart"]["status"] == "restarted", body
        assert body["plugins"] == ["auth_tokens", "weather_example"]
        assert (await http.get(f"{weather_url}/api/v1/weather-example")).status == 200


        # The manager's own service: it answers first, then the console restarts it with the plugin.
        own = await (await http.post(f"{manager_url}/api/v1/plugins/weather_example/enable",
                                     json={"service": "plugin-manager"}, headers=PEER)).json()
        assert own["restart"]["status"] == "requested" and "weather_example" in own["plugins"]
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                async with http.get(f"{manager_url}/api/v1/weather-example") as answer:
                    if answer.status == 200:
                        break
            except aiohttp.ClientConnectionError:
                pass  # between the stop and the start
            assert asyncio.get_running_loop().time() < deadline, "the manager did not come back with the plugin"
            await asyncio.sleep(0.2)
