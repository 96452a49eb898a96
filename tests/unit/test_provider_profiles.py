"""Server families: which one a model is, what it changes in a request, how its settings are
checked; and how long the retry loop waits."""

from __future__ import annotations

import pytest

from app.providers.failure import Failure
from app.providers.openai_chat import request_params
from app.providers.profiles import family_of, profile_for
from app.providers.retry import MAX_BACKOFF_SECONDS, MAX_RETRY_AFTER_SECONDS, RetryPolicy
from app.settings import ModelSettings, Settings, SettingsError


def model(**kwargs) -> ModelSettings:  # type: ignore[no-untyped-def]
    return ModelSettings(**{"name": "m", "provider": "openai", "model": "x", **kwargs})


@pytest.mark.parametrize(
    ("base_url", "family"),
    [
        (None, "openai"),
        ("https://api.openai.com/v1", "openai"),
        ("https://api.deepseek.com", "deepseek"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("http://localhost:11434/v1", "ollama"),
        ("http://gpu-box:8000/v1", "generic"),
        ("https://api.openai.com.evil.example/v1", "generic"),  # a host that only begins like one
    ],
)
def test_the_family_is_guessed_from_the_base_url(base_url, family):
    assert family_of(model(base_url=base_url)) == family


def test_a_configured_family_wins_over_the_base_url():
    assert family_of(model(base_url="http://localhost:11434/v1", provider_family="vllm")) == "vllm"


def test_an_anthropic_model_without_a_base_url_is_anthropic():
    assert family_of(model(provider="anthropic")) == "anthropic"


def test_only_openai_gets_the_newer_max_tokens_name():
    openai = request_params(model(max_tokens=100, provider_family="openai"), [], [])
    vllm = request_params(model(max_tokens=100, provider_family="vllm"), [], [])
    assert (openai.get("max_completion_tokens"), "max_tokens" in openai) == (100, False)
    assert (vllm.get("max_tokens"), "max_completion_tokens" in vllm) == (100, False)


def test_tgi_retries_its_failed_generations():
    assert 424 in profile_for(model(provider_family="tgi")).retryable_statuses
    assert 424 not in profile_for(model(provider_family="vllm")).retryable_statuses


def settings_with(entry: str, env: dict[str, str] | None = None) -> Settings:
    import tomllib

    config = tomllib.loads(f'[models.m]\nprovider = "openai"\nmodel = "x"\n{entry}')
    return Settings.from_mapping(config, env or {})


def test_provider_family_and_thinking_budget_are_read():
    s = settings_with('provider_family = "llamacpp"\n')
    assert s.models["m"].provider_family == "llamacpp"
    config = {"models": {"c": {"provider": "anthropic", "model": "claude", "thinking_budget_tokens": 2048}}}
    assert Settings.from_mapping(config, {}).models["c"].thinking_budget_tokens == 2048


@pytest.mark.parametrize(
    "entry",
    [
        'provider_family = "vllm\\u0000"\n',
        'provider_family = "VLLM"\n',
        "provider_family = 3\n",
        'provider_family = ["vllm"]\n',
        'provider_family = "anthropic"\n',  # an OpenAI-wire model cannot be Anthropic's
        "thinking_budget_tokens = 2048\n",  # not for the OpenAI wire
        "thinking_budget_tokens = true\n",
    ],
)
def test_hostile_profile_values_are_refused_with_the_key_named(entry):
    with pytest.raises(SettingsError, match=r"\[models\.m\]"):
        settings_with(entry)


@pytest.mark.parametrize("budget", [0, 1023, -5, "2048"])
def test_a_thinking_budget_below_the_apis_minimum_is_refused(budget):
    config = {"models": {"c": {"provider": "anthropic", "model": "claude", "thinking_budget_tokens": budget}}}
    with pytest.raises(SettingsError, match="thinking_budget_tokens"):
        Settings.from_mapping(config, {})


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon", ""])
def test_a_stream_idle_timeout_must_be_a_positive_number(value):
    with pytest.raises(SettingsError, match="TURNSTONE_MODEL_STREAM_IDLE_SECONDS"):
        Settings.from_mapping({}, {"TURNSTONE_MODEL_STREAM_IDLE_SECONDS": value})


def test_the_stream_idle_timeout_defaults_to_the_model_timeout():
    s = Settings.from_mapping({}, {})
    assert s.model_stream_idle_seconds == s.model_timeout_seconds
    assert (
        Settings.from_mapping({}, {"TURNSTONE_MODEL_STREAM_IDLE_SECONDS": "2.5"}).model_stream_idle_seconds
        == 2.5
    )


SERVER_ERROR = Failure(status=503, message="busy")


def test_backoff_doubles_with_jitter_between_half_and_all_of_it():
    policy = RetryPolicy(retries=5, backoff_seconds=1.0)
    for retry_number, ceiling in enumerate([1.0, 2.0, 4.0, 8.0]):
        waits = [policy.delay(retry_number, SERVER_ERROR) for _ in range(200)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 100  # drawn, not one fixed value: workers hit at once come back apart


def test_backoff_is_capped_however_many_retries():
    policy = RetryPolicy(retries=100, backoff_seconds=1.0)
    assert all(policy.delay(n, SERVER_ERROR) <= MAX_BACKOFF_SECONDS for n in (5, 10, 64, 10_000))


@pytest.mark.parametrize(
    ("asked", "waited"), [(1.0, 1.0), (0.0, 0.0), (-3.0, 0.0), (3600.0, MAX_RETRY_AFTER_SECONDS)]
)
def test_retry_after_is_honoured_within_its_cap(asked, waited):
    failure = Failure(status=429, message="slow down", retry_after=asked)
    assert RetryPolicy(retries=1, backoff_seconds=5.0).delay(0, failure) == waited


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Failure(status=429, message="x"), "rate_limited"),
        (Failure(status=529, message="Overloaded"), "overloaded"),
        (Failure(status=None, message="Overloaded", code="overloaded_error"), "overloaded"),
        (Failure(status=500, message="x"), "server_error"),
        (Failure(status=None, message="no answer within 2 s: read timed out"), "stalled"),
        (Failure(status=None, message="connection failed: refused"), "connection"),
        (Failure(status=None, message="the stream ended before the reply was complete"), "broken_stream"),
    ],
)
def test_each_failure_has_a_bounded_reason(failure, reason):
    assert failure.reason == reason
