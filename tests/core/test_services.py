"""The service table: a misspelt plugin name stops a service, a planned one is skipped."""
from __future__ import annotations

import logging

import pytest

from gateway.app import create_app
from gateway.config import ConfigError
from gateway.plugins import PluginError, installed_entry_points
from gateway.services import load_services


def write_table(tmp_path, text: str):
    path = tmp_path / "services.toml"
    path.write_text(text)
    return path


def test_every_plugin_of_the_real_table_is_installed_or_planned():
    installed = {entry_point.name for entry_point in installed_entry_points()}
    services = load_services()
    named = {name for spec in services for name in spec.plugins}
    planned = {name for spec in services for name in spec.planned}
    assert sorted(named - installed - planned) == []
    assert sorted(planned & installed) == [], "a planned plugin has landed: remove it from `planned`"


def test_a_misspelt_plugin_stops_start_up_naming_the_closest_installed_one(tmp_path, make_config):
    path = write_table(tmp_path, 'planned = ["knowledge"]\n[[service]]\nid = "web"\nport = 1\n'
                                 'plugins = ["frontend", "sesions"]\n')
    with pytest.raises(PluginError, match=r"plugin 'sesions' is not installed; did you mean 'sessions'\?"):
        create_app("web", make_config(), spec=load_services(path)[0])


def test_a_planned_plugin_is_skipped_with_a_notice(tmp_path, make_config, caplog):
    path = write_table(tmp_path, 'planned = ["hologram"]\n[[service]]\nid = "web"\nport = 1\n'
                                 'plugins = ["frontend", "hologram"]\n')
    spec = load_services(path)[0]
    assert spec.planned == ("hologram",)
    with caplog.at_level(logging.INFO, logger="gateway.plugins"):
        app = create_app("web", make_config(), spec=spec)
    assert "plugin 'hologram' is planned but not built yet" in caplog.text
    assert any(route.resource.canonical == "/" for route in app.router.routes())  # frontend loaded


def test_planned_must_be_a_list_of_names(tmp_path):
    path = write_table(tmp_path, 'planned = "memory"\n')
    with pytest.raises(ConfigError, match="`planned` must be a list of plugin names"):
        load_services(path)
