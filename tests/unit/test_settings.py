"""Settings: defaults, config.toml, and the environment overriding both."""

from __future__ import annotations

import pytest

from app.settings import DEFAULT_TRUNCATION, Settings, SettingsError


def test_defaults_need_no_configuration():
    s = Settings.from_mapping({}, {})
    assert s.database_url.startswith("sqlite:///")
    assert s.redis_url == "redis://127.0.0.1:6379/0"
    assert s.port == 8080
    assert s.tools.timeout == 120 and s.tools.truncation == DEFAULT_TRUNCATION == 262_144
    assert s.tools.approval_timeout_seconds == 0
    assert s.model().provider == "openai"


def test_environment_overrides_database_redis_and_port():
    env = {"DATABASE_URL": "postgresql://u@h/db", "REDIS_URL": "redis://r:1/2", "PORT": "9000"}
    s = Settings.from_mapping({"port": 7000}, env)
    assert (s.database_url, s.redis_url, s.port) == ("postgresql://u@h/db", "redis://r:1/2", 9000)


def test_turnstone_model_names_provider_and_model():
    s = Settings.from_mapping(
        {}, {"TURNSTONE_MODEL": "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY": "k"}
    )
    model = s.model()
    assert (model.provider, model.model, model.api_key) == ("anthropic", "claude-sonnet-4-5", "k")


def test_a_local_openai_compatible_server_needs_only_three_variables():
    env = {
        "TURNSTONE_MODEL": "openai:qwen",
        "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
        "OPENAI_API_KEY": "x",
    }
    model = Settings.from_mapping({}, env).model()
    assert model.base_url == "http://127.0.0.1:8000/v1" and model.model == "qwen"
    assert model.supports_vision is False  # local models default to no vision


def test_hosted_models_see_images_and_capabilities_override():
    s = Settings.from_mapping(
        {
            "models": {
                "local": {
                    "provider": "openai",
                    "model": "m",
                    "base_url": "http://x/v1",
                    "capabilities": {"supports_vision": True},
                },
                "gpt": {"provider": "openai", "model": "gpt-4.1"},
            }
        },
        {},
    )
    assert s.model("local").supports_vision is True
    assert s.model("gpt").supports_vision is True


@pytest.mark.parametrize("spec", ["gpt-4.1", "google:gemini", "openai:"])
def test_a_malformed_turnstone_model_is_a_clear_error(spec):
    with pytest.raises(SettingsError, match="TURNSTONE_MODEL"):
        Settings.from_mapping({}, {"TURNSTONE_MODEL": spec})


def test_unknown_tools_key_is_refused():
    with pytest.raises(SettingsError, match="unknown key"):
        Settings.from_mapping({"tools": {"timeuot": 5}}, {})


def test_tool_timeout_outside_range_is_refused():
    with pytest.raises(SettingsError, match="timeout"):
        Settings.from_mapping({"tools": {"timeout": 601}}, {})


def test_model_entry_needs_a_known_provider_and_a_model():
    with pytest.raises(SettingsError, match="provider"):
        Settings.from_mapping({"models": {"x": {"provider": "cohere", "model": "m"}}}, {})
    with pytest.raises(SettingsError, match="model"):
        Settings.from_mapping({"models": {"x": {"provider": "openai"}}}, {})


def test_config_file_is_read_from_turnstone_config(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        'default_model = "claude"\n[models.claude]\nprovider = "anthropic"\nmodel = "c"\n'
        "[tools]\ntimeout = 30\n"
    )
    s = Settings.load({"TURNSTONE_CONFIG": str(path)})
    assert s.model().name == "claude" and s.tools.timeout == 30


def test_a_broken_config_file_says_where(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[tools\n")
    with pytest.raises(SettingsError, match="config.toml"):
        Settings.load({"TURNSTONE_CONFIG": str(path)})


def test_sandbox_defaults_keep_commands_off_the_network():
    sandbox = Settings.from_mapping({}, {}).sandbox
    assert sandbox.mode == "auto"
    assert sandbox.default_network == "none" and "host" not in sandbox.networks
    assert "/usr" in sandbox.read_only_roots


def test_sandbox_data_root_comes_from_the_environment_first(tmp_path):
    config = {"sandbox": {"data_root": "/srv/elsewhere"}}
    assert Settings.from_mapping(config, {"TURNSTONE_DATA_ROOT": str(tmp_path)}).sandbox.data_root == str(
        tmp_path
    )
    assert Settings.from_mapping(config, {}).sandbox.data_root == "/srv/elsewhere"


@pytest.mark.parametrize(
    "section",
    [
        {"mode": "sometimes"},
        {"networks": ["none", "internet"]},
        {"default_network": "proxy", "networks": ["none"]},
        {"read_only_roots": ["relative/path"]},
        {"read_only_roots": "/usr"},
        {"processes": 0},
        {"memory_mb": True},
        {"data_root": "a\x00b"},
        {"unknown_key": 1},
    ],
)
def test_a_sandbox_value_the_service_cannot_use_is_refused_by_name(section):
    with pytest.raises(SettingsError, match=r"\[sandbox\]"):
        Settings.from_mapping({"sandbox": section}, {})


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ({}, {}, 4),
        ({"concurrency": 2}, {}, 2),
        ({"concurrency": 2}, {"TURNSTONE_WEBHOOK_CONCURRENCY": "6"}, 6),
    ],
)
def test_webhook_attempts_at_once_per_worker(config, env, expected):
    assert Settings.from_mapping({"webhooks": config}, env).webhooks.concurrency == expected


@pytest.mark.parametrize("bad", [0, -1, "many", 1.5])
def test_a_bad_webhook_concurrency_is_refused(bad):
    with pytest.raises(SettingsError, match="TURNSTONE_WEBHOOK_CONCURRENCY"):
        Settings.from_mapping({"webhooks": {"concurrency": bad}}, {})


def test_a_models_max_concurrent_is_a_whole_number_of_at_least_one():
    config = {"models": {"m": {"provider": "openai", "model": "x", "max_concurrent": 3}}}
    assert Settings.from_mapping(config, {}).models["m"].max_concurrent == 3
    assert (
        Settings.from_mapping({"models": {"m": {"provider": "openai", "model": "x"}}}, {})
        .models["m"]
        .max_concurrent
        is None
    )
    for bad in (0, -2, 1.5, "two", True):
        config["models"]["m"]["max_concurrent"] = bad
        with pytest.raises(SettingsError, match=r"\[models.m\] max_concurrent"):
            Settings.from_mapping(config, {})
