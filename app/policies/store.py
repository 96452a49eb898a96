"""Tool policy rules in the database: added, listed, deleted (API and CLI alike), and read by a
model step as the `Book` of its workstream's owner. Read at every step, so a change holds from
the next step on, with no restart."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from sqlalchemy import ColumnElement, func, or_
from sqlmodel import col, select

from app.errors import ConflictError, NotFoundError, UnprocessableError
from app.policies import patterns
from app.policies.rules import Book, Effect, Rule
from app.storage.database import Database
from app.storage.models import ToolPolicy, User

log = logging.getLogger(__name__)

MAX_RULES = 500  # every rule is tried on every call: a list past this is a mistake
MAX_REASON_CHARS = 500


def create(
    db: Database,
    effect: str,
    tool: str,
    command: str | None = None,
    user: str | None = None,
    reason: str | None = None,
    created_by: str | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    """A new rule, as `as_dict` shows it. UnprocessableError for a pattern or user it cannot
    have, or for both a user and a group; ConflictError past MAX_RULES. A group need not have
    members yet: the rule applies to whoever an admin puts in it."""
    _compiled(effect, tool, command)
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise UnprocessableError(f"reason: at most {MAX_REASON_CHARS} characters", field="reason")
    if user is not None and group is not None:
        raise UnprocessableError("group: a rule is one user's or one group's, not both", field="group")
    group = group.strip().lower() if group is not None else None
    with db.session() as s:
        owner = None
        if user is not None:
            owner = s.exec(select(User).where(User.name == user.strip().lower())).first()
            if owner is None:
                raise UnprocessableError(f"user: no user {user[:64]!r}", field="user")
        held = s.exec(select(func.count()).select_from(ToolPolicy)).one()
        if held >= MAX_RULES:
            raise ConflictError(f"at most {MAX_RULES} policy rules: delete one first")
        row = ToolPolicy(
            id=uuid.uuid4().hex,
            effect=effect,
            tool=tool,
            command=command,
            user_id=owner.id if owner else None,
            group_name=group,
            reason=reason or None,
            created_by=created_by,
        )
        s.add(row)
        s.flush()
        return as_dict(row, owner.name if owner else None)


def list_all(db: Database) -> list[dict[str, Any]]:
    with db.reader() as s:
        rows = s.exec(_ordered(select(ToolPolicy, User.name).outerjoin(User))).all()
        return [as_dict(row, name) for row, name in rows]


def delete(db: Database, rule_id: str) -> None:
    with db.session() as s:
        row = s.get(ToolPolicy, rule_id)
        if row is None:
            raise NotFoundError(f"no policy rule {rule_id[:64]!r}")
        s.delete(row)


def book(db: Database, owner_id: str | None) -> Book:
    """The rules a call of `owner_id`'s workstreams meets: theirs, their groups', everyone's
    (None: the operator's, everyone's only)."""
    mine: ColumnElement[bool] = col(ToolPolicy.user_id).is_(None)  # everyone's and every group's
    if owner_id is not None:
        mine = or_(mine, col(ToolPolicy.user_id) == owner_id)
    with db.reader() as s:
        rows = s.exec(_ordered(select(ToolPolicy, User.name).outerjoin(User).where(mine))).all()
        # The owner's groups, read only when some rule is a group's (most steps meet none).
        owner = s.get(User, owner_id) if owner_id and any(r.group_name for r, _n in rows) else None
    groups = set(owner.groups or []) if owner is not None else set()
    own: list[Rule] = []
    grouped: list[Rule] = []
    everyone: list[Rule] = []
    for row, name in rows:
        rule = _rule(row, name)
        if rule is None or (row.group_name is not None and row.group_name not in groups):
            continue
        scope = own if row.user_id is not None else grouped if row.group_name is not None else everyone
        scope.append(rule)
    return Book(tuple(own), tuple(everyone), tuple(grouped))


def as_dict(row: ToolPolicy, user_name: str | None) -> dict[str, Any]:
    return {
        "id": row.id,
        "effect": row.effect,
        "tool": row.tool,
        "command": row.command,
        "user": user_name,
        "user_id": row.user_id,
        "group": row.group_name,
        "reason": row.reason,
        "created_by": row.created_by,
        "created_at": row.created_at.isoformat(),
    }


def _ordered(query: Any) -> Any:
    return query.order_by(col(ToolPolicy.created_at), col(ToolPolicy.id))


def _rule(row: ToolPolicy, user_name: str | None) -> Rule | None:
    try:
        tool, command = _compiled(row.effect, row.tool, row.command)
    except UnprocessableError:  # only a hand-edited row can be so; it must not stop every step
        log.warning("policy rule %s cannot be used and is skipped", row.id)
        return None
    return Rule(row.id, Effect(row.effect), tool, command, row.user_id, row.reason, user_name, row.group_name)


def _compiled(effect: str, tool: str, command: str | None) -> tuple[patterns.Glob, patterns.Glob | None]:
    if effect not in {e.value for e in Effect}:
        raise UnprocessableError("effect: one of allow, deny, ask", field="effect")
    try:
        tool_glob = patterns.tool_glob(tool)
    except patterns.PatternError as exc:
        raise UnprocessableError(f"tool: {str(exc).removeprefix('tool: ')}", field="tool") from None
    if command is None:
        return tool_glob, None
    try:
        return tool_glob, patterns.command_glob(command)
    except patterns.PatternError as exc:
        raise UnprocessableError(f"command: {exc}", field="command") from None
