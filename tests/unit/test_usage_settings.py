"""`[prices]` and `[budgets]`: accepted shapes, hostile values refused naming the key, and the
cost of a step's usage as each provider counts cached input."""

from __future__ import annotations

import pytest

from app.settings import Settings, SettingsError
from app.usage.prices import Price

MODELS = {"m": {"provider": "anthropic", "model": "x", "base_url": "http://127.0.0.1:1"}}


def test_prices_and_budgets_load():
    config = {
        "models": MODELS,
        "prices": {"m": {"input": 3, "output": 15.0}},
        "budgets": {"tokens_per_day": 10, "users": {"ann": {"cost_per_month": 2.5}}},
    }
    s = Settings.from_mapping(config, {})
    assert s.prices["m"] == Price(input=3.0, output=15.0)
    assert s.budgets.default.tokens_per_day == 10 and s.budgets.users["ann"].cost_per_month == 2.5
    assert s.budgets.users["ann"].tokens_per_day == 10  # a user's table is over the default


@pytest.mark.parametrize(
    "prices",
    [
        {"nosuch": {"input": 1}},
        {"m": {"input": -1}},
        {"m": {"input": float("nan")}},
        {"m": {"input": float("inf")}},
        {"m": {"input": True}},
        {"m": {"input": "3"}},
        {"m": {"input\x00": 3}},
        {"m": 3},
        [],
    ],
)
def test_hostile_prices_are_refused(prices):
    with pytest.raises(SettingsError, match="prices"):
        Settings.from_mapping({"models": MODELS, "prices": prices}, {})


@pytest.mark.parametrize(
    "budgets",
    [
        {"tokens_per_day": 1.5},
        {"tokens_per_day": -1},
        {"tokens_per_day": 10**30},
        {"cost_per_day": float("nan")},
        {"cost_per_day": "1"},
        {"cost_per_week": 1},
        {"users": []},
        {"users": {"ann": 5}},
        {"users": {"ann": {"tokens_per_day": True}}},
    ],
)
def test_hostile_budgets_are_refused(budgets):
    with pytest.raises(SettingsError, match="budgets"):
        Settings.from_mapping({"models": MODELS, "budgets": budgets}, {})


def test_cost_counts_cached_input_as_each_provider_does():
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 800}
    # OpenAI's 1,000 input tokens include the 800 read from the cache; Anthropic's do not
    assert price.cost(usage, "openai") == pytest.approx((200 * 3 + 100 * 15 + 800 * 0.3) / 1e6)
    assert price.cost(usage, "anthropic") == pytest.approx((1000 * 3 + 100 * 15 + 800 * 0.3) / 1e6)
    assert price.cost({"input_tokens": "x", "output_tokens": True}, "openai") == 0
