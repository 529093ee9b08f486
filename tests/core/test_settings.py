"""Declared plugin settings: checked at start-up, defaults filled in, and the reference in
docs/configuration.md generated from the same schemas."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from marshmallow import fields, validate

from gateway.app import create_app
from gateway.cli import main as gateway_cli
from gateway.plugins import Plugin, PluginError, PluginSettings
from gateway.settings_reference import REFERENCE_COMMAND

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


class TunedSettings(PluginSettings):
    retries = fields.Integer(load_default=3, validate=validate.Range(min=0), metadata={
        "description": "Attempts before giving up."})
    greeting = fields.String(load_default="hello", metadata={"description": "What it says first."})


class Tuned(Plugin):
    """Keeps the settings its setup was given."""

    def __init__(self, name: str = "tuned", schema: type[PluginSettings] | None = TunedSettings):
        self.name, self.settings_schema, self.seen = name, schema, None

    def setup(self, registrar):
        self.seen = registrar.settings


def test_defaults_are_filled_in(make_config):
    plugin = Tuned()
    create_app("svc", make_config({"plugins": {"tuned": {"greeting": "hi"}}}), plugins=[plugin])
    assert plugin.seen == {"enabled": True, "retries": 3, "greeting": "hi"}


def test_an_unknown_key_stops_start_up_naming_it(make_config):
    with pytest.raises(PluginError, match=r"plugins\.tuned\.retry: Unknown field"):
        create_app("svc", make_config({"plugins": {"tuned": {"retry": 5}}}), plugins=[Tuned()])


def test_a_value_of_the_wrong_type_stops_start_up_naming_it(make_config):
    with pytest.raises(PluginError, match=r"plugins\.tuned\.retries: Not a valid integer"):
        create_app("svc", make_config({"plugins": {"tuned": {"retries": "many"}}}), plugins=[Tuned()])


def test_a_plugin_without_a_schema_accepts_only_enabled(make_config):
    plugin = Tuned("bare", schema=None)
    create_app("svc", make_config({"plugins": {"bare": {"enabled": True}}}), plugins=[plugin])
    assert plugin.seen == {"enabled": True}
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
