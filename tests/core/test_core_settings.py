"""The core's typed settings (gateway/core_settings.py, issue 42): defaults from
conf/default.toml alone, values checked when the view is built, and no dotted-string reads of
the configuration left in the services' code."""
from __future__ import annotations

import dataclasses
import re
import tomllib
import typing
from pathlib import Path

import pytest

from gateway.config import Config, ConfigError
from gateway.core_settings import CoreSettings

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_a_config_of_a_few_values_has_every_key_from_default_toml():
    settings = Config({"database": {"pool_max": 3}}).settings
    assert settings.database.pool_max == 3
    assert settings.database.pool_min == 1                  # default.toml's
    assert settings.console.port == 9090 and settings.bus.prefix == "assistant:"
    assert settings.vectors.shared_socket is None           # run time only: not in the file


def test_every_declared_key_is_in_default_toml_and_every_core_key_there_is_declared():
    """One source of defaults: a field without a default must have its value in the file, and a
    key the file gives must be one the code can read as an attribute."""
    defaults = tomllib.loads((PROJECT_ROOT / "conf" / "default.toml").read_text())
    for name, section_class in typing.get_type_hints(CoreSettings).items():
        fields = dataclasses.fields(section_class)
        required = {item.name for item in fields if item.default is dataclasses.MISSING}
        assert required <= set(defaults[name]), f"[{name}] lacks {required - set(defaults[name])}"
        assert set(defaults[name]) <= {item.name for item in fields}, f"[{name}] has keys no field declares"
    assert set(defaults) - {"plugins"} == set(typing.get_type_hints(CoreSettings))


def test_an_int_is_taken_where_a_number_is_declared():
    settings = Config({"core": {"shutdown_timeout": 3}, "vectors": {"bm25_k1": 2}}).settings
    assert settings.core.shutdown_timeout == 3.0 and isinstance(settings.core.shutdown_timeout, float)
    assert isinstance(settings.vectors.bm25_k1, float)


@pytest.mark.parametrize(("values", "message"), [
    ({"core": {"shutdown_timeout": "ten"}}, "core.shutdown_timeout must be a number"),
    ({"console": {"port": 90.5}}, "console.port must be an integer"),
    ({"console": {"port": True}}, "console.port must be an integer"),
    ({"auth": {"registration_enabled": "yes"}}, "auth.registration_enabled must be true or false"),
    ({"fetch": {"allow_hosts": "llm.lan"}}, "fetch.allow_hosts must be a list of strings"),
    ({"fetch": {"model_hosts": ["llm.lan", 5]}}, r"fetch.model_hosts\[1\] must be a string"),
    ({"core": {"listen_hosts": {"frontend": 0}}}, "core.listen_hosts.frontend must be a string"),
    ({"database": "postgres://"}, r"\[database\] must be a table"),
])
def test_a_value_of_the_wrong_type_names_its_key_and_the_type(values, message):
    with pytest.raises(ConfigError, match=message):
        Config(values).settings


def test_a_wrong_type_stops_loading(tmp_path):
    with pytest.raises(ConfigError, match="database.pool_max must be an integer"):
        Config.load(overrides={"core.data_dir": str(tmp_path), "database.pool_max": "ten"}, environ={})


def test_unknown_keys_are_no_error():
    assert Config({"auth": {"a_plugins_own_key": 1}}).settings.auth.admin_username == "admin"


def test_the_view_is_rebuilt_when_a_plugin_adds_values(tmp_path):
    config = Config.load(overrides={"core.data_dir": str(tmp_path)},
                         environ={"A_PLUGINS_ADDRESS": "http://m"})
    assert config.settings.core.public_base_url == ""
    config.adopt({"A_PLUGINS_ADDRESS": ("core.public_base_url", str)}, {})
    assert config.settings.core.public_base_url == "http://m"
    config.adopt({}, {"plugins.example.secret": lambda: "generated"})
    assert config.get("plugins.example.secret") == "generated"


def test_dynamic_keys_of_peers_and_fetch():
    settings = Config({"peers": {"ai_core_url": "http://core:8/"},
                       "fetch": {"model_hosts": ["llm.lan"]}}).settings
    assert settings.peers.url_of("ai_core") == "http://core:8"
    assert settings.peers.url_of("no_such_peer") == ""
    assert settings.fetch.hosts_for("model") == ["llm.lan"]
    with pytest.raises(ValueError, match="no_such_hosts"):
        settings.fetch.hosts_for("no_such")


# `config.get("section.key")` or `.section("name")`: reads that skip the typed view.
DOTTED_READ = re.compile(r"""\.get\(f?["'][a-z_]+\.[a-z_{}]+["']|\.section\(""")
ALLOWED = {Path("gateway/config.py"), Path("gateway/core_settings.py")}


def test_no_dotted_reads_of_the_configuration_outside_the_config_modules():
    found = [f"{path.relative_to(PROJECT_ROOT)}:{number}: {line.strip()}"
             for folder in ("gateway", "plugins", "console")
             for path in sorted((PROJECT_ROOT / folder).rglob("*.py"))
             if path.relative_to(PROJECT_ROOT) not in ALLOWED
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if DOTTED_READ.search(line)]
    assert not found, "read config.settings instead:\n" + "\n".join(found)


def test_the_dotted_read_rule_catches_the_forms_it_is_meant_to():
    for line in ('config.get("auth.jwt_secret")', "self.config.get('console.port')",
                 'config.get(f"peers.{name}_url")', 'config.section("fetch")'):
        assert DOTTED_READ.search(line), line
    for line in ('config.get("timezone")', 'config.get("cmps", config.get("components"))'):
        assert not DOTTED_READ.search(line), line
