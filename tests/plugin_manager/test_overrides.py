"""DATA_DIR/service-plugins.toml: what the plugin manager writes, applied on top of the service
table by the loader that `gateway serve` and the console use."""
from __future__ import annotations

import pytest

from gateway.config import ConfigError
from gateway.services import OVERRIDE_FILE, load_services, set_plugin_enabled


def test_changes_apply_on_top_of_the_table_and_undo_cleanly(tmp_path):
    table = tmp_path / "services.toml"
    table.write_text('[[service]]\nid = "web"\nport = 1\nplugins = ["auth_tokens", "frontend"]\n'
                     '[[service]]\nid = "other"\nport = 2\nplugins = ["frontend"]\n')
    data = tmp_path / "data"
    assert load_services(table, data_dir=data)[0].plugins == ("auth_tokens", "frontend")  # no file yet
    set_plugin_enabled(data, "web", "frontend", False, listed=True)
    set_plugin_enabled(data, "web", "weather_example", True, listed=False)
    web, other = load_services(table, data_dir=data)
    assert web.plugins == ("auth_tokens", "weather_example") and other.plugins == ("frontend",)
    assert load_services(table)[0].plugins == ("auth_tokens", "frontend")  # without data_dir: the table
    set_plugin_enabled(data, "web", "frontend", True, listed=True)
    set_plugin_enabled(data, "web", "weather_example", False, listed=False)
    assert load_services(table, data_dir=data)[0].plugins == ("auth_tokens", "frontend")
    assert "[service" not in (data / OVERRIDE_FILE).read_text()  # nothing left to override


def test_a_malformed_file_stops_the_loader_naming_it(tmp_path):
    table = tmp_path / "services.toml"
    table.write_text('[[service]]\nid = "web"\nport = 1\n')
    (tmp_path / OVERRIDE_FILE).write_text('[service.web]\nenable = "frontend"\n')
    with pytest.raises(ConfigError, match="service-plugins.toml.*`enable` and `disable` lists"):
        load_services(table, data_dir=tmp_path)
