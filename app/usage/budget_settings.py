"""The `[budgets]` section of config.toml: how many tokens, or dollars (`[prices]`), a user's
workstreams may spend per day and per month. Parsed here, loaded by app.settings; enforced by
app/usage/budgets.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

LIMITS = ("tokens_per_day", "tokens_per_month", "cost_per_day", "cost_per_month")
MAX_LIMIT = 1e15


class BudgetsError(ValueError):
    """A `[budgets]` table the service cannot use."""


@dataclass(frozen=True)
class Limits:
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    cost_per_day: float | None = None
    cost_per_month: float | None = None

    @property
    def is_set(self) -> bool:
        return any(getattr(self, name) is not None for name in LIMITS)


@dataclass(frozen=True)
class BudgetSettings:
    default: Limits = field(default_factory=Limits)
    users: Mapping[str, Limits] = field(default_factory=dict)  # by user name

    @property
    def is_set(self) -> bool:
        return self.default.is_set or any(limits.is_set for limits in self.users.values())


def from_config(section: Any) -> BudgetSettings:
    if not isinstance(section, Mapping):
        raise BudgetsError("[budgets] must be a table")
    users = section.get("users", {})
    if not isinstance(users, Mapping):
        raise BudgetsError("[budgets.users] must be a table of [budgets.users.NAME]")
    default = _limits(Limits(), {k: v for k, v in section.items() if k != "users"}, "[budgets]")
    own = {str(name): _limits(default, entry, f"[budgets.users.{name}]") for name, entry in users.items()}
    return BudgetSettings(default, own)


def _limits(base: Limits, entry: Any, where: str) -> Limits:
    if not isinstance(entry, Mapping):
        raise BudgetsError(f"{where} must be a table of {', '.join(LIMITS)}")
    unknown = set(entry) - set(LIMITS)
    if unknown:
        raise BudgetsError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    changes: dict[str, Any] = {key: _limit(value, key, f"{where} {key}") for key, value in entry.items()}
    return replace(base, **changes)


def _limit(value: Any, key: str, where: str) -> float | int:
    whole = key.startswith("tokens")
    is_int = isinstance(value, int) and not isinstance(value, bool)
    is_float = isinstance(value, float) and not whole and math.isfinite(value)
    if not (is_int or is_float) or not 0 <= value <= MAX_LIMIT:
        kind = "whole number" if whole else "number"
        raise BudgetsError(f"{where} must be a {kind} from 0 to {MAX_LIMIT:g}, not {value!r}")
    return value
