"""Declared plugin settings: checked at start-up, defaults filled in, and the reference in
docs/configuration.md generated from the same schemas."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from marshmallow import fields, validate

from gateway.app import create_app
from gateway.cli import main as gateway_cli
from gateway.plugin_settings import PluginSettings, setting
from gateway.plugins import Plugin, PluginError
from gateway.settings_reference import REFERENCE_COMMAND

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@dataclass(frozen=True, kw_only=True)
class TunedSettings(PluginSettings):
    retries: int = setting(fields.Integer(load_default=3, validate=validate.Range(min=0), metadata={
        "description": "Attempts before giving up."}))
    greeting: str = setting(fields.String(load_default="hello", metadata={"description": "What it says first."}))
    hosts: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Each instance gets a list of its own."}))


class Tuned(Plugin):
    """Keeps the settings its setup was given."""

    def __init__(self, name: str = "tuned", schema: type[PluginSettings] | None = TunedSettings):
        self.name, self.settings_class, self.seen = name, schema, None

    def setup(self, registrar):
        self.seen = registrar.settings


def test_defaults_are_filled_in(make_config):
    plugin = Tuned()
    create_app("svc", make_config({"plugins": {"tuned": {"greeting": "hi"}}}), plugins=[plugin])
    assert plugin.seen == TunedSettings(enabled=True, retries=3, greeting="hi", hosts=[])
    assert (plugin.seen.retries, plugin.seen.greeting) == (3, "hi")


def test_settings_arrive_as_a_frozen_object_whose_mutable_defaults_are_not_shared(make_config):
    first, second = Tuned(), Tuned()
    create_app("svc", make_config({}), plugins=[first])
    create_app("svc", make_config({}), plugins=[second])
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.seen.retries = 4
    first.seen.hosts.append("example.org")
    assert second.seen.hosts == []


def test_a_setting_without_a_default_is_refused_where_it_is_declared():
    with pytest.raises(TypeError, match="load_default"):
        setting(fields.Integer())


def test_an_unknown_key_stops_start_up_naming_it(make_config):
    with pytest.raises(PluginError, match=r"plugins\.tuned\.retry: Unknown field"):
        create_app("svc", make_config({"plugins": {"tuned": {"retry": 5}}}), plugins=[Tuned()])


def test_a_value_of_the_wrong_type_stops_start_up_naming_it(make_config):
    with pytest.raises(PluginError, match=r"plugins\.tuned\.retries: Not a valid integer"):
        create_app("svc", make_config({"plugins": {"tuned": {"retries": "many"}}}), plugins=[Tuned()])


def test_a_plugin_without_a_schema_accepts_only_enabled(make_config):
    plugin = Tuned("bare", schema=None)
    create_app("svc", make_config({"plugins": {"bare": {"enabled": True}}}), plugins=[plugin])
    assert plugin.seen == PluginSettings(enabled=True)
    with pytest.raises(PluginError, match=r"plugins\.bare\.colour: Unknown field"):
        create_app("svc", make_config({"plugins": {"bare": {"colour": "red"}}}),
                   plugins=[Tuned("bare", schema=None)])


def test_gateway_plugins_lists_each_setting_with_type_default_and_description():
    listing = CliRunner().invoke(gateway_cli, ["plugins", "--distribution", "assistant-gateway"])
    assert listing.exit_code == 0, listing.output
    assert ("setting plugins.auth.rate_limit_per_minute (integer, >= 1) = 5  "
            "Sign-in and registration attempts per client address per minute.") in listing.output
    assert "weather_example" not in listing.output
    as_json = CliRunner().invoke(gateway_cli, ["plugins", "--json"])
    rows = {row["name"]: row for row in json.loads(as_json.output)}
    assert {"key": "trusted_proxies", "type": "list of strings", "default": [],
            "description": "Reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For is read."} \
        in rows["auth"]["settings"]
    assert rows["weather_example"]["settings"] == [
        {"key": "enabled", "type": "boolean", "default": True,
         "description": "Whether services that list this plugin load it."}]


def test_docs_configuration_md_is_generated_from_the_schemas_and_up_to_date():
    generated = CliRunner().invoke(gateway_cli, REFERENCE_COMMAND.split(">")[0].split()[1:])
    assert generated.exit_code == 0, generated.output
    assert REFERENCE.read_text() == generated.output, (
        f"docs/configuration.md is stale: run `{REFERENCE_COMMAND}`")
