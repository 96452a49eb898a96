"""Budgets enforced: a turn is not started while its owner's budget is spent (429), and a turn
that crosses one stops before its next step (docs/usage.md). The limits are `[budgets]`
(app/usage/budget_settings.py); workstreams of the operator's token have none."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlmodel import select

from app.errors import TooManyRequestsError
from app.runtime import Runtime
from app.storage.models import User, Workstream
from app.usage import report, warnings
from app.usage.budget_settings import BudgetSettings


class BudgetExceededError(TooManyRequestsError):
    """429: a budget is spent; the message names it and when it resets."""


@dataclass(frozen=True)
class Spent:
    budget: str  # one of LIMITS
    limit: float
    used: float
    resets_at: datetime

    def describe(self, who: str) -> str:
        unit = "tokens" if self.budget.startswith("tokens") else "dollars"
        period = "daily" if self.budget.endswith("day") else "monthly"
        return (
            f"{who} has spent the {period} budget of {self.limit:g} {unit} ({self.budget}: "
            f"{self.used:g} used); it resets at {self.resets_at.isoformat()}"
        )


def check(rt: Runtime, ws_id: str) -> None:
    """BudgetExceededError (429) when the workstream's owner has spent a budget."""
    spent, who = exceeded(rt, ws_id)
    if spent is not None:
        raise BudgetExceededError(
            spent.describe(who), budget=spent.budget, resets_at=spent.resets_at.isoformat()
        )


def exceeded(rt: Runtime, ws_id: str, now: datetime | None = None) -> tuple[Spent | None, str]:
    """The first budget the workstream's owner has spent (None: none), and the owner's name."""
    settings: BudgetSettings = rt.settings.budgets
    if not settings.is_set:
        return None, ""
    with rt.db.reader() as s:
        found = s.exec(
            select(Workstream.owner_id, User.name)
            .join(User, User.id == Workstream.owner_id)  # type: ignore[arg-type]
            .where(Workstream.id == ws_id)
        ).first()
    if found is None:  # the operator's workstream, or none: no budget
        return None, ""
    owner_id, name = found
    limits = settings.users.get(name, settings.default)
    now = now or datetime.now(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    for since, resets_at, tokens_key, cost_key in (
        (day, day + timedelta(days=1), "tokens_per_day", "cost_per_day"),
        (month, next_month, "tokens_per_month", "cost_per_month"),
    ):
        if getattr(limits, tokens_key) is None and getattr(limits, cost_key) is None:
            continue
        total = report.usage(rt, report.Query("day", owner_id=owner_id, since=since))["total"]
        used = {tokens_key: total["input_tokens"] + total["output_tokens"], cost_key: total["cost"]}
        for key, amount in used.items():
            limit = getattr(limits, key)
            if limit is not None:
                warnings.crossed(rt, str(owner_id), name, key, limit, amount, since)
            if limit is not None and amount >= limit:
                return Spent(key, limit, amount, resets_at), name
    return None, name
