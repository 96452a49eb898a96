"""Usage reports: the tokens of every model step (and compaction) stored with its message,
added up by day, model or user, with their cost from the price table (`GET /v1/api/usage`,
`turnstone-jobs usage`; docs/usage.md)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from app.runtime import Runtime
from app.storage.models import Message, User, Workstream

GROUPS = ("day", "model", "user")
COUNTED = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
OPERATOR = "operator"  # whose usage a workstream with no owner is


@dataclass(frozen=True)
class Query:
    group_by: str = "day"
    owner_id: str | None = None  # only this user's workstreams ("" : the operator's)
    ws_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def usage(rt: Runtime, query: Query) -> dict[str, Any]:
    """Rows of added-up counts (and cost, when every model counted has a price), one per group,
    and their total."""
    groups: dict[str, dict[str, Any]] = defaultdict(_empty)
    total = _empty()
    names = _user_names(rt)
    for spent, at, model, owner in _steps(rt, query):
        key = {"day": at.date().isoformat(), "model": model, "user": names.get(owner, owner or OPERATOR)}
        for row in (groups[key[query.group_by]], total):
            _add(rt, row, spent, model)
    rows = [{query.group_by: key, **row} for key, row in sorted(groups.items())]
    return {"group_by": query.group_by, "rows": rows, "total": total}


def _steps(rt: Runtime, query: Query) -> list[tuple[dict[str, Any], datetime, str, str | None]]:
    # the model that gave the answer (a fallback's) where stored; for older answers, the workstream's
    answered_by = func.coalesce(Message.model, Workstream.model)
    statement = (
        select(Message.usage, Message.created_at, answered_by, Workstream.owner_id)
        .join(Workstream, col(Workstream.id) == col(Message.ws_id))
        .where(col(Message.usage).is_not(None), col(Message.role).in_(("assistant", "summary")))
    )
    if query.owner_id is not None:
        owner = None if query.owner_id == "" else query.owner_id
        statement = statement.where(
            col(Workstream.owner_id).is_(None) if owner is None else col(Workstream.owner_id) == owner
        )
    if query.ws_id is not None:
        statement = statement.where(col(Workstream.id) == query.ws_id)
    if query.since is not None:
        statement = statement.where(col(Message.created_at) >= query.since)
    if query.until is not None:
        statement = statement.where(col(Message.created_at) < query.until)
    with rt.db.reader() as s:
        found = s.exec(statement).all()
    default = rt.settings.default_model
    return [(dict(spent or {}), at, model or default, owner) for spent, at, model, owner in found]


def _empty() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTED, 0), "steps": 0, "cost": 0.0, "unpriced_steps": 0}


def _add(rt: Runtime, row: dict[str, Any], spent: dict[str, Any], model: str) -> None:
    row["steps"] += 1
    for key in COUNTED:
        value = spent.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            row[key] += value
    price, configured = rt.settings.prices.get(model), rt.settings.model(model)
    if price is None or configured is None:
        row["unpriced_steps"] += 1
        return
    row["cost"] = round(row["cost"] + price.cost(spent, configured.provider), 6)


def _user_names(rt: Runtime) -> dict[str | None, str]:
    with rt.db.reader() as s:
        return {user_id: name for user_id, name in s.exec(select(User.id, User.name)).all()}


def user_id(rt: Runtime, name: str) -> str | None:
    """The id of the user called `name`; "" for the operator; None when there is no such user."""
    if name == OPERATOR:
        return ""
    with rt.db.reader() as s:
        return s.exec(select(User.id).where(User.name == name)).first()
