import json
import os
import stat

import pytest

from gateway.config import Config, ConfigError


def test_defaults_then_file_then_environment_then_overrides(tmp_path):
    file = tmp_path / "site.toml"
    file.write_text('[auth]\nadmin_username = "from-file"\nregistration_enabled = true\n'
                    '[database]\npool_max = 3\n')
    environ = {"GATEWAY_CONFIG": str(file), "DATA_DIR": str(tmp_path / "d"), "ADMIN_USERNAME": "from-env",
               "JWT_SECRET": "s", "ADMIN_PASSWORD": "p"}
    config = Config.load(environ=environ)
    assert config.get("auth.admin_username") == "from-env"          # environment beats the file
    assert config.get("auth.registration_enabled") is True           # the file beats the defaults
    assert config.get("database.pool_max") == 3
    assert config.get("console.port") == 9090                        # untouched default
    overridden = Config.load(environ=environ, overrides={"auth.admin_username": "explicit"})
    assert overridden.get("auth.admin_username") == "explicit"       # explicit overrides beat all


def test_environment_values_are_typed(tmp_path):
    config = Config.load(environ={"DATA_DIR": str(tmp_path), "REGISTRATION_ENABLED": "true",
                                  "CONSOLE_PORT": "9191"})
    assert config.get("auth.registration_enabled") is True
    assert config.get("console.port") == 9191


def test_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="REGISTRATION_ENABLED"):
        Config.load(environ={"DATA_DIR": str(tmp_path), "REGISTRATION_ENABLED": "maybe"})
    with pytest.raises(ConfigError, match="CONSOLE_PORT"):
        Config.load(environ={"DATA_DIR": str(tmp_path), "CONSOLE_PORT": "ninety"})


def test_unset_secrets_are_generated_once_owner_only_and_announced(tmp_path, capsys):
    environ = {"DATA_DIR": str(tmp_path)}
    first = Config.load(environ=environ)
    announced = capsys.readouterr().err
    secrets_file = tmp_path / "secrets.json"
    assert stat.S_IMODE(os.stat(secrets_file).st_mode) == 0o600
    password = first.get("auth.admin_password")
    assert password and password in announced and len(first.get("auth.jwt_secret")) >= 32
    assert len(first.get("auth.registration_verify_code")) == 6
    second = Config.load(environ=environ)
    assert second.get("auth.admin_password") == password             # stable across starts
    assert second.get("auth.jwt_secret") == first.get("auth.jwt_secret")
    assert capsys.readouterr().err == ""                             # printed only when generated
    assert json.loads(secrets_file.read_text())["auth.jwt_secret"] == first.get("auth.jwt_secret")


def test_a_configured_secret_is_not_generated(tmp_path):
    config = Config.load(environ={"DATA_DIR": str(tmp_path), "JWT_SECRET": "mine", "ADMIN_PASSWORD": "pw"})
    assert config.get("auth.jwt_secret") == "mine"
    stored = json.loads((tmp_path / "secrets.json").read_text())
    assert "auth.jwt_secret" not in stored and "auth.admin_password" not in stored


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        Config.load(environ={"DATA_DIR": str(tmp_path), "GATEWAY_CONFIG": str(tmp_path / "nope.toml")})


def test_a_plugins_own_variables_and_secrets_are_read_when_a_service_loads_it(tmp_path):
    """The core names no feature's variable: the webhooks plugin declares WEBHOOK_KEY and its
    generated key, the AI core OPENAI_BASE_URL; they apply when the service loads the plugin."""
    from gateway.app import create_app
    from gateway.plugins import environment_names, installed_plugins

    environ = {"DATA_DIR": str(tmp_path), "DISCORD_PUBLIC_KEY": "ab" * 32, "OPENAI_BASE_URL": "http://models"}
    config = Config.load(environ=environ, overrides={"plugins.webhooks.webhook_key": "given"})
    assert not config.get("plugins.webhooks.discord_public_key")  # no plugin loaded yet: no such variable read
    config.adopt(installed_plugins(["webhooks"])["webhooks"].environment, {})
    assert config.get("plugins.webhooks.discord_public_key") == "ab" * 32
    config.adopt({"WEBHOOK_KEY": ("plugins.webhooks.webhook_key", str)}, {})
    assert config.get("plugins.webhooks.webhook_key") == "given"      # a caller's setting wins over the variable

    fresh = Config.load(environ={"DATA_DIR": str(tmp_path / "other")})
    plugins = installed_plugins(["auth_tokens", "ai_core_client", "files", "sessions", "chat", "webhooks"])
    create_app("gateway", fresh, plugins=list(plugins.values()))
    generated = json.loads((tmp_path / "other" / "secrets.json").read_text())["plugins.webhooks.webhook_key"]
    assert fresh.get("plugins.webhooks.webhook_key") == generated and len(generated) >= 24
    assert {"WEBHOOK_KEY", "DISCORD_PUBLIC_KEY", "OPENAI_BASE_URL", "DATABASE_URL"} <= environment_names()


def test_a_webhook_key_generated_under_its_former_name_is_still_the_key(tmp_path):
    """0.1.0 kept the webhooks' settings in [auth]: its DATA_DIR/secrets.json (or a backup of it)
    holds the generated key as `auth.webhook_key`, which the plugin's own key takes over."""
    from gateway.plugins import installed_plugins

    (tmp_path / "secrets.json").write_text(json.dumps({"auth.webhook_key": "from-0.1.0"}))
    config = Config.load(environ={"DATA_DIR": str(tmp_path)})
    webhooks = installed_plugins(["webhooks"])["webhooks"]
    config.adopt(webhooks.environment, webhooks.generated_secrets, webhooks.former_settings)
    assert config.get("plugins.webhooks.webhook_key") == "from-0.1.0"
    stored = json.loads((tmp_path / "secrets.json").read_text())
    assert stored["plugins.webhooks.webhook_key"] == stored["auth.webhook_key"] == "from-0.1.0"


def test_settings_in_their_former_core_section_are_still_read(tmp_path, caplog):
    """An operator's file from 0.1.0 ([auth] discord_public_key, [models] openai_base_url, [fetch]
    push_hosts...) keeps working, with a warning naming the new place; the own name and the
    variable win over it."""
    from gateway.plugins import installed_plugins

    file = tmp_path / "gateway.toml"
    file.write_text('[auth]\ndiscord_public_key = "old"\nwebhook_key = "old-key"\n'
                    '[models]\nopenai_base_url = "http://old/v1"\n'
                    '[fetch]\npush_hosts = ["push.lan"]\nautomation_hosts = ["ha.lan"]\nmcp_hosts = ["mcp.lan"]\n'
                    '[plugins.webhooks]\nwebhook_key = "own-key"\n')
    environ = {"DATA_DIR": str(tmp_path), "GATEWAY_CONFIG": str(file), "DISCORD_PUBLIC_KEY": "from-variable"}
    config = Config.load(environ=environ)
    with caplog.at_level("WARNING", logger="gateway.config"):
        for plugin in installed_plugins(["webhooks", "ai_core", "notifications", "automation"]).values():
            config.adopt(plugin.environment, {}, plugin.former_settings)
    assert config.get("plugins.webhooks.discord_public_key") == "from-variable"
    assert config.get("plugins.webhooks.webhook_key") == "own-key"
    assert config.get("plugins.ai_core.openai_base_url") == "http://old/v1"
    assert config.get("plugins.ai_core.mcp_hosts") == ["mcp.lan"]
    assert config.get("plugins.notifications.push_hosts") == ["push.lan"]
    assert config.get("plugins.automation.http_hosts") == ["ha.lan"]
    assert "models.openai_base_url is read as plugins.ai_core.openai_base_url" in caplog.text


def test_a_table_given_for_a_plugin_is_merged_with_its_dotted_keys(tmp_path):
    config = Config.load(environ={}, overrides={"core.data_dir": str(tmp_path), "plugins.webhooks.webhook_key": "k",
                                                "plugins.webhooks": {"ai_timeout": 5}})
    assert config.plugin_section("webhooks") == {"webhook_key": "k", "ai_timeout": 5}


def test_a_setting_the_caller_gave_in_a_table_wins_over_the_plugins_variable(tmp_path):
    """The caller's settings win over the variables, given one by one or as a table: a plugin's
    variables are read later (`adopt`), after the overrides were applied."""
    from gateway.plugins import installed_plugins

    webhooks = installed_plugins(["webhooks"])["webhooks"]
    environ = {"DATA_DIR": str(tmp_path), "WEBHOOK_KEY": "from-variable"}
    for overrides in ({"plugins.webhooks": {"webhook_key": "given"}},
                      {"plugins": {"webhooks": {"webhook_key": "given"}}}):
        config = Config.load(environ=environ, overrides=overrides)
        config.adopt(webhooks.environment, {}, webhooks.former_settings)
        assert config.get("plugins.webhooks.webhook_key") == "given"
