"""The `[prices.NAME]` tables of config.toml: what a configured model costs, in US dollars per
million tokens, and the cost of one step's usage. Parsed here, loaded by app.settings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PER = 1_000_000  # prices are per million tokens
KEYS = ("input", "output", "cache_read", "cache_write")
MAX_PRICE = 1_000_000.0  # dollars per million tokens: anything above is a typo


class PricesError(ValueError):
    """A `[prices]` table the service cannot use."""


@dataclass(frozen=True)
class Price:
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Mapping[str, Any], provider: str) -> float:
        """Dollars for one step's usage. OpenAI counts cached input inside `input_tokens`;
        Anthropic counts it apart (app/providers/reply_parts.py)."""
        read = _count(usage, "cache_read_input_tokens")
        written = _count(usage, "cache_creation_input_tokens")
        fresh = _count(usage, "input_tokens") - (read if provider == "openai" else 0)
        dollars = (
            max(0, fresh) * self.input
            + _count(usage, "output_tokens") * self.output
            + read * self.cache_read
            + written * self.cache_write
        )
        return dollars / PER


def from_config(section: Any, models: set[str]) -> dict[str, Price]:
    """`[prices.NAME]` for configured models NAME, each key a non-negative number."""
    if not isinstance(section, Mapping):
        raise PricesError("[prices] must be a table of [prices.MODEL]")
    table: dict[str, Price] = {}
    for name, entry in section.items():
        where = f"[prices.{name}]"
        if name not in models:
            raise PricesError(f"{where}: no [models.{name}] is configured")
        if not isinstance(entry, Mapping):
            raise PricesError(f"{where} must be a table: input, output, cache_read, cache_write")
        unknown = set(entry) - set(KEYS)
        if unknown:
            raise PricesError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        table[name] = Price(**{key: _price(entry[key], f"{where} {key}") for key in entry})
    return table


def _price(value: Any, key: str) -> float:
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number) or not 0 <= number <= MAX_PRICE:
        raise PricesError(f"{key} must be dollars per million tokens, 0 to {MAX_PRICE:g}, not {value!r}")
    return float(number)


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
