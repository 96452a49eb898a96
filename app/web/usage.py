"""`GET /v1/api/usage`: tokens and their cost added up by day, model or user (app/usage/report.py).
Admins see everyone's; a user sees their own."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import ForbiddenError, NotFoundError
from app.runtime import Runtime
from app.usage import report
from app.users import ownership
from app.web import shapes
from app.web.access import principal
from app.web.contract import operation

usage_api = Blueprint("usage", __name__, url_prefix="/v1/api")


def _rt() -> Runtime:
    return current_app.extensions["runtime"]


@usage_api.get("/usage")
@operation(
    "Tokens and their cost added up by day, model or user: an admin's everyone's, a user's their own",
    query=shapes.UsageFilter,
    answers={200: shapes.UsageReport},
    errors={
        403: "Another user's usage, asked for by someone who is not an admin",
        404: "No such workstream (or another user's), or no such user",
    },
)
def usage_report(query: shapes.UsageFilter) -> Any:
    since = _moment(query.since, end=False)
    until = _moment(query.until, end=True)
    rt, who = _rt(), principal()
    if query.workstream is not None:
        ownership.require_workstream(rt, who, query.workstream)  # someone else's is a 404
    owner = _owner(rt, who, query.user)
    found = report.usage(rt, report.Query(query.group_by or "day", owner, query.workstream, since, until))
    return jsonify(found), 200


def _owner(rt: Runtime, who: Any, user: str | None) -> str | None:
    """Whose usage: a user sees only their own; an admin anyone's (None: everyone's)."""
    if not who.is_admin:
        if user is not None and user != who.name:
            raise ForbiddenError("user: only an admin sees another user's usage", field="user")
        return who.user_id if who.user_id is not None else ""
    if user is None:
        return None
    found = report.user_id(rt, user)
    if found is None:
        raise NotFoundError(f"user: no user {user!r}", field="user")
    return found


def _moment(value: date | datetime | None, *, end: bool) -> datetime | None:
    """A time in UTC (when it says no offset), or a day: its start, or for `end` the next day's."""
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo is not None else value.replace(tzinfo=UTC)
    start = datetime(value.year, value.month, value.day, tzinfo=UTC)
    return start + timedelta(days=1) if end else start
