"""Titles as the model writes them, tidied; the `[roles] titler` and `titles` settings; the
model catalog's view of a configuration holding secrets."""

from __future__ import annotations

import json

import pytest

from app import titles
from app.providers import catalog
from app.settings import Settings, SettingsError
from tests.fakes.model_server import TITLE_REQUEST_MARKER, is_title_request


@pytest.mark.parametrize(
    ("written", "title"),
    [
        ('"Fixing the flaky test."', "Fixing the flaky test"),
        ("Title: **Release notes**\n\nMore words", "Release notes"),
        ("\n\n  spaced   out  \n", "spaced out"),
        ("nul\x00 and \ud800 surrogate", "nul and surrogate"),
        ("word " * 40, ("word " * 12).strip()),
        ("", ""),
    ],
)
def test_a_title_is_one_tidy_line(written, title):
    assert titles.tidy(written) == title
    assert len(titles.tidy(written)) <= titles.MAX_TITLE_CHARS


def test_the_fake_model_server_knows_a_title_request_by_its_instructions():
    assert titles.INSTRUCTIONS.startswith(TITLE_REQUEST_MARKER)
    openai = {
        "messages": [{"role": "system", "content": titles.INSTRUCTIONS}, {"role": "user", "content": "x"}]
    }
    anthropic = {"system": titles.INSTRUCTIONS, "messages": [{"role": "user", "content": "x"}]}
    assert is_title_request(openai) and is_title_request(anthropic)
    # a conversation that merely mentions the words is no title request
    quoted = {"messages": [{"role": "user", "content": titles.INSTRUCTIONS}]}
    assert not is_title_request(quoted) and not is_title_request([])


def test_the_titler_must_be_a_configured_chat_model():
    models = {
        "cheap": {"provider": "openai", "model": "small"},
        "ranker": {
            "provider": "rerank",
            "model": "r",
            "base_url": "http://r",
            "capabilities": {"supports_rerank": True},
        },
    }
    assert Settings.from_mapping({"models": models, "roles": {"titler": "cheap"}}, {}).titler == "cheap"
    assert Settings.from_mapping({"models": models}, {}).titler is None
    for wrong in ("ranker", "nope", 5):
        with pytest.raises(SettingsError, match="titler"):
            Settings.from_mapping({"models": models, "roles": {"titler": wrong}}, {})
    assert Settings.from_mapping({"titles": False}, {}).titles is False
    with pytest.raises(SettingsError, match="titles"):
        Settings.from_mapping({"titles": "no"}, {})


def test_the_catalog_says_what_models_do_and_nothing_secret():
    settings = Settings.from_mapping(
        {
            "default_model": "local",
            "models": {
                "local": {"provider": "openai", "model": "qwen", "base_url": "http://user:pw@gpu.lan:8000/v1",
                          "api_key_env": "LOCAL_KEY", "context_window": 32768},
                "thinker": {"provider": "anthropic", "model": "c", "thinking_budget_tokens": 2048},
            },
        },
        {"LOCAL_KEY": "sk-local-secret", "ANTHROPIC_API_KEY": "sk-ant-secret"},
    )  # fmt: skip
    listing = catalog.listing(settings)
    text = json.dumps(listing)
    for secret in ("sk-local-secret", "sk-ant-secret", "gpu.lan", "pw", "base_url", "api_key"):
        assert secret not in text
    models = {m["name"]: m for m in listing["models"]}
    assert listing["default"] == "local" and models["local"]["default"]
    assert models["local"]["context_window"] == 32768 and models["local"]["vision"] is False
    assert models["thinker"]["reasoning"] is True and models["thinker"]["vision"] is True
