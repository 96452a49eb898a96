"""A migrated database (SQLite or PostgreSQL) for tests that call app/ directly, with no service;
and the ownership seam (app/memory/owners.py) pointed at a test's own table of owners."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from app.memory import owners
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import Message, Workstream
from tests.integration.services import Database as TestDatabase
from tests.integration.services import postgres_available


def migrated(backend: str, tmp_path: Path) -> Iterator[Database]:
    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    made = TestDatabase(backend, tmp_path)
    try:
        upgrade(made.url)
        db = Database(made.url)
        yield db
        db.dispose()
    finally:
        made.drop()


def add_workstream(db: Database, ws_id: str, name: str | None = None) -> str:
    with db.session() as s:
        s.add(Workstream(id=ws_id, name=name or ws_id, working_dir="/tmp"))
    return ws_id


def add_message(db: Database, ws_id: str, role: str, content: str | None, **fields: Any) -> int:
    with db.session() as s:
        row = Message(ws_id=ws_id, role=role, content=content, **fields)
        s.add(row)
        s.flush()
        assert row.id is not None
        return row.id


class Owners:
    """Who owns which workstream, and who is behind which token, as the users feature will
    say; until then, set here and read through the seam's three functions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.workstreams: dict[str, str | None] = {}
        self.tokens: dict[str, str | None] = {}
        monkeypatch.setattr(owners, "owner_of_workstream", lambda _s, ws_id: self.workstreams.get(ws_id))
        monkeypatch.setattr(owners, "owner_of_token", lambda name: self.tokens.get(name or ""))
        monkeypatch.setattr(owners, "owned_workstreams", self._owned)

    def _owned(self, owner: str | None) -> Any:
        ids = [ws for ws, who in self.workstreams.items() if who == owner] or [""]
        return select(Workstream.id).where(col(Workstream.id).in_(ids))
