"""Whose is this: the one seam where memory, recall and skills decide ownership.

A workstream belongs to `workstreams.owner_id` (app/users/ownership.py); a caller of the API
is their user id. None is the operator: the workstreams and notes made by the operator's
token, or by tokens from before users existed.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from app.storage.models import User, Workstream
from app.users.principal import Principal

OPERATOR: str | None = None


def owner_of_workstream(session: Session, ws_id: str) -> str | None:
    """The person a workstream belongs to (None: the operator)."""
    return session.exec(select(Workstream.owner_id).where(Workstream.id == ws_id)).first()


def is_admin(session: Session, owner: str | None) -> bool:
    """Whether `owner` acts with an admin's authority: the operator, or an admin user."""
    if owner is None:
        return True
    return bool(session.exec(select(User.is_admin).where(User.id == owner)).first())


def owner_of_principal(principal: Principal) -> str | None:
    """The person behind an API token (None: the operator)."""
    return principal.user_id


def owned_workstreams(owner: str | None) -> Any:
    """A select of the ids of `owner`'s workstreams: what recall searches and whose
    workstream-scoped memories the owner's API sees."""
    owned = col(Workstream.owner_id).is_(None) if owner is None else col(Workstream.owner_id) == owner
    return select(Workstream.id).where(owned)
