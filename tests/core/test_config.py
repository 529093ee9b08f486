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
    config = Config.load(environ=environ, overrides={"auth.webhook_key": "given"})
    assert not config.get("auth.discord_public_key")  # no plugin loaded yet: the core reads no such variable
    config.adopt(installed_plugins(["webhooks"])["webhooks"].environment, {})
    assert config.get("auth.discord_public_key") == "ab" * 32
    config.adopt({"WEBHOOK_KEY": ("auth.webhook_key", str)}, {})
    assert config.get("auth.webhook_key") == "given"      # a caller's setting wins over the variable

    fresh = Config.load(environ={"DATA_DIR": str(tmp_path / "other")})
    plugins = installed_plugins(["auth_tokens", "ai_core_client", "files", "sessions", "chat", "webhooks"])
    create_app("gateway", fresh, plugins=list(plugins.values()))
    generated = json.loads((tmp_path / "other" / "secrets.json").read_text())["auth.webhook_key"]
    assert fresh.get("auth.webhook_key") == generated and len(generated) >= 24
    assert {"WEBHOOK_KEY", "DISCORD_PUBLIC_KEY", "OPENAI_BASE_URL", "DATABASE_URL"} <= environment_names()
