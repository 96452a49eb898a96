"""Memories in the database: saved (upserted by name within a scope), found, listed, changed, deleted.

Every query goes through `View`: what one workstream, or one API caller, may see. A
workstream sees global memories, its owner's user memories and its own workstream
memories; an API caller sees global ones, its own user ones and those of its workstreams.
Global memories reach every user's prompts, so only an admin (or the operator), or a workstream
of theirs, writes, changes or deletes them (`View.may_change_global`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, or_
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.bm25 import Index, without_punctuation
from app.memory import owners
from app.reranking import retrieval
from app.settings import ToolSettings
from app.storage.database import Database
from app.storage.models import Memory, utcnow

TYPES = ("user", "project", "feedback", "reference")
SCOPES = ("global", "workstream", "user")
DEFAULT_TYPE = "project"
DEFAULT_SCOPE = "user"  # global ones reach every user's prompts: saved there only when asked
GLOBAL_RULE = "global memories reach every user's prompts: only an admin (or the operator) writes them"
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
NAME_RULE = "a snake_case name: lower-case letters, digits and '_', starting with a letter, at most 64"


@dataclass(frozen=True)
class View:
    """Whose memories are in view. `ws_id` set: one workstream's view; None: its owner's whole view."""

    owner: str | None
    ws_id: str | None = None
    may_change_global: bool = False  # an admin's or the operator's view, or a workstream of theirs

    def clause(self) -> Any:
        mine = (
            col(Memory.ws_id) == self.ws_id
            if self.ws_id is not None
            else col(Memory.ws_id).in_(owners.owned_workstreams(self.owner))
        )
        return _seen(_user_key(self.owner), mine)


def _seen(user_key: Any, mine: Any) -> Any:
    """Global memories, the user's (`user_key`) and those of the workstreams `mine` matches."""
    scope = col(Memory.scope)
    return or_(
        scope == "global",
        and_(scope == "user", col(Memory.scope_key) == user_key),
        and_(scope == "workstream", mine),
    )


NEWEST_FIRST = (col(Memory.updated_at).desc(), col(Memory.id).desc())
# One workstream's whole view, built once: every model step reads it for the system prompt, and
# building the statement cost more than running it.
_WORKSTREAM_VIEW = (
    select(Memory)
    .where(_seen(bindparam("user_key"), col(Memory.ws_id) == bindparam("ws_id")))
    .order_by(*NEWEST_FIRST)
)


def view_of_workstream(db: Database, ws_id: str) -> View:
    with db.reader() as s:
        owner = owners.owner_of_workstream(s, ws_id)
        return View(owner, ws_id, may_change_global=owners.is_admin(s, owner))


class GlobalMemoryError(ValueError):
    """A write, change or delete of a global memory through a view that may not make it."""

    def __init__(self) -> None:
        super().__init__(GLOBAL_RULE)


def _user_key(owner: str | None) -> str:
    return owner or ""


def scope_key(scope: str, view: View) -> str:
    if scope == "workstream":
        return view.ws_id or ""
    if scope == "user":
        return _user_key(view.owner)
    return ""


def save(
    db: Database, view: View, name: str, content: str, description: str, type_: str, scope: str
) -> tuple[Memory, bool]:
    """Insert or replace the memory `name` of `scope`; True when it is new.

    Two saves of one name racing: the loser's insert meets the unique constraint and it
    updates the winner's row instead. GlobalMemoryError for a global one `view` may not write."""
    if scope == "global" and not view.may_change_global:
        raise GlobalMemoryError()
    for _attempt in range(2):
        try:
            return _upsert(db, view, name, content, description, type_, scope)
        except IntegrityError:
            continue
    return _upsert(db, view, name, content, description, type_, scope)


def _upsert(
    db: Database, view: View, name: str, content: str, description: str, type_: str, scope: str
) -> tuple[Memory, bool]:
    key = scope_key(scope, view)
    with db.session() as s:
        row = s.exec(
            select(Memory).where(Memory.scope == scope, Memory.scope_key == key, Memory.name == name)
        ).first()
        created = row is None
        if row is None:
            row = Memory(
                id=uuid.uuid4().hex,
                name=name,
                content=content,
                scope=scope,
                scope_key=key,
                ws_id=view.ws_id if scope == "workstream" else None,
                owner_id=view.owner if scope == "user" else None,
            )
        row.content, row.description, row.type, row.updated_at = content, description, type_, utcnow()
        s.add(row)
    return row, created


def visible(
    s: Session,
    view: View,
    type: str | None = None,  # noqa: A002 - the memory field's name, as callers filter by it
    scope: str | None = None,
    ws_id: str | None = None,
) -> list[Memory]:
    """Every memory `view` sees (filtered), newest first."""
    if view.ws_id is not None and type is None and scope is None and ws_id is None:
        found = s.exec(_WORKSTREAM_VIEW, params={"user_key": _user_key(view.owner), "ws_id": view.ws_id})
        return list(found.all())
    query = select(Memory).where(view.clause())
    if type is not None:
        query = query.where(Memory.type == type)
    if scope is not None:
        query = query.where(Memory.scope == scope)
    if ws_id is not None:
        query = query.where(Memory.ws_id == ws_id)
    return list(s.exec(query.order_by(*NEWEST_FIRST)).all())


def index_of(memories: Sequence[Memory]) -> Index[int]:
    return Index(
        (n, without_punctuation(f"{m.name} {m.description} {m.content}")) for n, m in enumerate(memories)
    )


def ranked(
    memories: Sequence[Memory], query: str, index: Index[int] | None = None
) -> list[tuple[float, Memory]]:
    """The memories relevant to `query` (BM25 over name, description, content), best first,
    newest first among equals (`memories` come newest first and the sort is stable)."""
    if not memories:
        return []
    index = index or index_of(memories)
    scores = index.scores(without_punctuation(query))
    scored = [(scores[n], m) for n, m in enumerate(memories) if scores.get(n, 0.0) > 0]
    return sorted(scored, key=lambda pair: -pair[0])


def document(m: Memory) -> str:
    """A memory as a reranker reads it: name, description and content, one to a line."""
    return "\n".join(part for part in (m.name, m.description, m.content) if part)


def search(
    db: Database, view: View, query: str, limit: int, tools: ToolSettings | None = None, **filters: Any
) -> list[Memory]:
    """The best `limit` by BM25, or, with `tools` that rerank (`[tools] rerank_bm25`), BM25's
    best ones in the reranker's order."""
    with db.reader() as s:
        memories = visible(s, view, **filters)
    found = [m for _score, m in ranked(memories, query)]
    if tools is not None:
        found = retrieval.ordered(tools, query, found, document)
    return found[:limit]


def listed(db: Database, view: View, limit: int, **filters: Any) -> list[Memory]:
    with db.reader() as s:
        return visible(s, view, **filters)[:limit]


def named(db: Database, view: View, name: str, scope: str | None = None) -> list[Memory]:
    with db.reader() as s:
        query = select(Memory).where(view.clause(), Memory.name == name)
        if scope is not None:
            query = query.where(Memory.scope == scope)
        return list(s.exec(query).all())


def get(db: Database, view: View, memory_id: str) -> Memory | None:
    with db.reader() as s:
        return s.exec(select(Memory).where(view.clause(), Memory.id == memory_id)).first()


def update(db: Database, view: View, memory_id: str, changes: dict[str, str]) -> Memory | None:
    """Change a memory's content, description or type; None when `view` has no such memory,
    GlobalMemoryError when it is a global one `view` may not change."""
    with db.session() as s:
        row = _changeable(s, view, memory_id)
        if row is None:
            return None
        for key, value in changes.items():
            setattr(row, key, value)
        row.updated_at = utcnow()
        s.add(row)
    return row


def delete(db: Database, view: View, memory_id: str) -> bool:
    """Delete one memory `view` sees; False when there is none (or it went meanwhile),
    GlobalMemoryError when it is a global one `view` may not delete."""
    with db.session() as s:
        row = _changeable(s, view, memory_id)
        if row is None:
            return False
        s.delete(row)
    return True


def _changeable(s: Session, view: View, memory_id: str) -> Memory | None:
    row = s.exec(select(Memory).where(view.clause(), Memory.id == memory_id)).first()
    if row is not None and row.scope == "global" and not view.may_change_global:
        raise GlobalMemoryError()
    return row


def as_dict(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "content": m.content,
        "type": m.type,
        "scope": m.scope,
        "ws_id": m.ws_id,
        "owner_id": m.owner_id,
        "created_at": m.created_at.isoformat(),
        "updated_at": m.updated_at.isoformat(),
    }
