"""Who may see a workstream: its owner, and admins. One rule, reused by every feature that
reaches a workstream (the API, the websocket, recall, memories, watches, sub-agents).

A workstream with no owner is the operator's (made with TURNSTONE_API_TOKEN, or before users
existed): admins see it, users do not. Another user's workstream is *not found* (404), never
forbidden, so that ids do not leak.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlmodel import col

from app.errors import NotFoundError
from app.runtime import Runtime
from app.storage.models import Workstream
from app.users.known_owners import Owner
from app.users.principal import Principal


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
