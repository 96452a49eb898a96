"""Whose is this: the one seam where memory, recall and skills decide ownership.

Users do not exist yet: every workstream and every API token belongs to the operator,
spelled None. When they do, these three functions read `workstreams.owner_id` and the
token's owner; nothing else in memory or recall needs to change.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from app.storage.models import Workstream

OPERATOR: str | None = None


def owner_of_workstream(session: Session, ws_id: str) -> str | None:
    """The person a workstream belongs to (None: the operator)."""
    return OPERATOR


def owner_of_token(token_name: str | None) -> str | None:
    """The person behind an API token (None: the operator)."""
    return OPERATOR


def owned_workstreams(owner: str | None) -> Any:
    """A select of the ids of `owner`'s workstreams: what recall searches and whose
    workstream-scoped memories the owner's API sees."""
    return select(Workstream.id)
