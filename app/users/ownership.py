"""Who may see a workstream: its owner, and admins. One rule, reused by every feature that
reaches a workstream (the API, the websocket, recall, memories, watches, sub-agents).

A workstream with no owner is the operator's (made with TURNSTONE_API_TOKEN, or before users
existed): admins see it, users do not. Another user's workstream is *not found* (404), never
forbidden, so that ids do not leak.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import bindparam, select
from sqlmodel import col
from sqlmodel import select as sqlmodel_select

from app.errors import NotFoundError
from app.runtime import Runtime
from app.storage.models import Workstream
from app.users.known_owners import Owner
from app.users.principal import Principal

T = TypeVar("T")


def owner_for_new(principal: Principal) -> str | None:
    """The owner a workstream that `principal` creates gets."""
    return principal.user_id


def owner_for_child(parent: Workstream) -> str | None:
    """A child workstream (a sub-agent's) belongs to its parent's owner, whoever started it."""
    return parent.owner_id


def can_see(principal: Principal, ws: Workstream) -> bool:
    return _may_see(principal, ws.owner_id)


def _may_see(principal: Principal, owner_id: str | None) -> bool:
    if principal.is_admin:
        return True
    return owner_id is not None and owner_id == principal.user_id


def visible_clause(principal: Principal) -> Any:
    """A WHERE clause on Workstream for what `principal` may see (None: everything)."""
    if principal.is_admin:
        return None
    if principal.user_id is None:  # the operator without admin: cannot happen, but see nothing
        return col(Workstream.id).is_(None)
    return col(Workstream.owner_id) == principal.user_id


def require_workstream(rt: Runtime, principal: Principal, ws_id: str) -> None:
    """NotFoundError (404) when the workstream does not exist or `principal` may not see it
    (someone else's): the same answer, so an id says nothing about who owns it.

    An owner this process has read before is not read again (`KnownOwners`: it never
    changes), so a workstream deleted since may pass here; the caller's own read of it says
    404 then. Where nothing else reads it, `forget` it first."""
    owner = rt.owners.get(ws_id)
    if owner is None:
        with rt.db.reader() as s:  # its owner only, without the ORM
            found = s.connection().execute(_OWNER, {"ws_id": ws_id}).first()
        if found is None:
            raise NotFoundError(f"no workstream {ws_id}")
        owner = Owner(found.owner_id)
        rt.owners.add(ws_id, owner)
    if not _may_see(principal, owner.user_id):
        raise NotFoundError(f"no workstream {ws_id}")


_OWNER = select(col(Workstream.owner_id)).where(col(Workstream.id) == bindparam("ws_id"))


# -- things a user keeps (webhook endpoints, schedules, triggers): their owner's, any for an admin --


def owned_clause(owner_column: Any, principal: Principal) -> Any:
    """A WHERE clause on an `owner_id` column for the rows that are `principal`'s own (the
    operator's: those with no owner)."""
    column = col(owner_column)
    return column.is_(None) if principal.user_id is None else column == principal.user_id


def may_reach(principal: Principal, owner_id: str | None) -> bool:
    """Whether `principal` may reach a kept thing of `owner_id` (its owner, or an admin)."""
    return principal.is_admin or owner_id == principal.user_id


def owned_row(rt: Runtime, who: Principal, model: type[T], row_id: str, what: str) -> T:
    """The kept row `row_id` of `model` (with an `owner_id`) if `who` may reach it; a 404 naming
    `what` otherwise, the same whether it is missing or another user's."""
    with rt.db.reader() as s:
        row = s.get(model, row_id)
    if row is None or not may_reach(who, getattr(row, "owner_id", None)):
        raise NotFoundError(f"no {what} {row_id}")
    return row


def owned_rows(rt: Runtime, who: Principal, model: type[T]) -> list[T]:
    """`who`'s own rows of `model` (with `owner_id` and `created_at`), oldest first."""
    owner, created = getattr(model, "owner_id"), getattr(model, "created_at")  # noqa: B009
    with rt.db.reader() as s:
        query = sqlmodel_select(model).where(owned_clause(owner, who)).order_by(col(created))
        return list(s.exec(query).all())
