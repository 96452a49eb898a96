"""Token limits and token counts: `max_tokens` from the model's configuration or its
family, and usage on the "finish" event, through the real SDKs against the fake server."""

from __future__ import annotations

import pytest

from app.providers import ContextWindowError, openai_chat, stream_reply
from app.settings import DEFAULT_MAX_TOKENS, ModelSettings, Settings, SettingsError
from tests.fakes.model_server import FakeModelServer, Reply
from tests.unit.test_providers import FAST, HELLO, PROVIDERS, model_for, of_kind, reply_events


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


def configured_model(server: FakeModelServer, entry: dict) -> ModelSettings:
    """The model as a user configures it: a `[models.x]` entry, the base URL from the environment."""
    env = {"ANTHROPIC_BASE_URL": server.anthropic_base_url, "OPENAI_BASE_URL": server.openai_base_url}
    model = Settings.from_mapping({"models": {"x": entry}}, env).model("x")
    assert model is not None
    return model


# -- max_tokens ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_name", "expected"),
    [
        ("claude-3-5-haiku-latest", 8192),
        ("claude-3-5-sonnet-20241022", 8192),
        ("claude-3-7-sonnet-20250219", 64_000),
        ("claude-sonnet-4-20250514", 64_000),
        ("claude-sonnet-4-5", 64_000),
        ("claude-opus-4-20250514", 32_000),
        ("claude-opus-4-1", 32_000),
        ("claude-opus-4-5", 64_000),
        ("anthropic.claude-3-haiku-20240307-v1:0", 4096),
        ("some-new-model", DEFAULT_MAX_TOKENS),
    ],
)
def test_anthropic_max_tokens_defaults_to_the_model_family_limit(server, model_name, expected):
    reply_events(configured_model(server, {"provider": "anthropic", "model": model_name}))

    assert server.history[-1].body["max_tokens"] == expected


def test_anthropic_max_tokens_comes_from_the_model_configuration(server):
    entry = {"provider": "anthropic", "model": "claude-sonnet-4-5", "max_tokens": 20_000}

    reply_events(configured_model(server, entry))

    assert server.history[-1].body["max_tokens"] == 20_000


def test_a_model_from_turnstone_model_gets_its_family_limit(server):
    env = {"TURNSTONE_MODEL": "anthropic:claude-opus-4-1", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
    model = Settings.from_mapping({}, env).model()
    assert model is not None

    reply_events(model)

    assert server.history[-1].body["max_tokens"] == 32_000


@pytest.mark.parametrize("value", [0, -5, 1.5, "8192", True])
def test_max_tokens_must_be_a_positive_whole_number(value):
    config = {"models": {"big": {"provider": "anthropic", "model": "claude-sonnet-4-5", "max_tokens": value}}}

    with pytest.raises(SettingsError, match=r"\[models\.big\] max_tokens must be a positive whole number"):
        Settings.from_mapping(config, {})


def test_openai_compatible_server_gets_max_tokens_only_when_configured(server):
    reply_events(configured_model(server, {"provider": "openai", "model": "qwen3"}))
    reply_events(configured_model(server, {"provider": "openai", "model": "qwen3", "max_tokens": 3000}))

    assert "max_tokens" not in server.history[0].body
    assert server.history[1].body["max_tokens"] == 3000


def test_hosted_openai_gets_max_completion_tokens():
    model = ModelSettings(name="x", provider="openai", model="gpt-5", api_key="k", max_tokens=3000)

    params = openai_chat.request_params(model, HELLO, [])

    assert params["max_completion_tokens"] == 3000 and "max_tokens" not in params


def test_anthropic_asks_again_with_the_room_the_context_window_leaves(server):
    refusal = (
        "input length and `max_tokens` exceed context limit: 150000 + 64000 > 200000, "
        "decrease input length or `max_tokens` and try again"
    )
    server.enqueue(Reply(status=400, error_message=refusal))
    server.enqueue(Reply(text="fits now"))

    events = reply_events(configured_model(server, {"provider": "anthropic", "model": "claude-sonnet-4-5"}))

    assert "".join(e.text for e in of_kind(events, "content")) == "fits now"
    assert [r.body["max_tokens"] for r in server.history] == [64_000, 50_000]


def test_no_room_left_for_a_reply_is_a_context_window_error(server):
    refusal = "input length and `max_tokens` exceed context limit: 199500 + 64000 > 200000, decrease input"
    server.enqueue(Reply(status=400, error_message=refusal))

    with pytest.raises(ContextWindowError):
        reply_events(configured_model(server, {"provider": "anthropic", "model": "claude-sonnet-4-5"}))

    assert len(server.history) == 1


# -- usage -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_finish_carries_the_usage_the_server_reported(server, provider):
    server.enqueue(Reply(text="counted", input_tokens=1234, output_tokens=56))

    events = reply_events(model_for(server, provider))

    assert events[-1].kind == "finish"
    assert events[-1].usage == {"input_tokens": 1234, "output_tokens": 56}


@pytest.mark.parametrize(
    ("provider", "input_tokens"),
    [("openai", 1234 + 1000), ("anthropic", 1234)],  # OpenAI counts cached input in its total
)
def test_cached_input_tokens_are_reported_besides(server, provider, input_tokens):
    server.enqueue(Reply(text="cached", input_tokens=1234, output_tokens=56, cached_tokens=1000))

    events = reply_events(model_for(server, provider))

    assert events[-1].usage == {
        "input_tokens": input_tokens,
        "output_tokens": 56,
        "cache_read_input_tokens": 1000,
    }


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_after_a_restart_is_the_completed_attempts(server, provider):
    server.enqueue(Reply(chunks=["a ", "b ", "c"], break_after=1, input_tokens=10, output_tokens=1))
    server.enqueue(Reply(text="whole", input_tokens=700, output_tokens=8))

    events = reply_events(model_for(server, provider))

    assert events[-1].usage == {"input_tokens": 700, "output_tokens": 8}


def test_a_server_that_refuses_stream_options_is_asked_without_them_from_then_on(server, monkeypatch):
    monkeypatch.setattr(openai_chat, "_REFUSES_STREAM_OPTIONS", set())
    server.refuses_stream_options = True
    model = model_for(server, "openai")

    first = reply_events(model, messages=[{"role": "user", "content": "one"}])
    second = reply_events(model, messages=[{"role": "user", "content": "two"}])

    assert "".join(e.text for e in of_kind(first, "content")) == "ok: one"
    assert "".join(e.text for e in of_kind(second, "content")) == "ok: two"
    assert ["stream_options" in r.body for r in server.history] == [True, False, False]
    assert first[-1].usage == {}  # this server reports none unasked


def test_the_stream_options_refusal_is_remembered_per_endpoint(server, monkeypatch):
    monkeypatch.setattr(openai_chat, "_REFUSES_STREAM_OPTIONS", set())
    server.refuses_stream_options = True
    reply_events(model_for(server, "openai"))

    with FakeModelServer() as other:
        events = list(stream_reply(model_for(other, "openai"), HELLO, [], **FAST))

    assert other.history[0].body["stream_options"] == {"include_usage": True}
    assert events[-1].usage["input_tokens"] > 0
