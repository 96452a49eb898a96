"""A migrated database (SQLite or PostgreSQL) for tests that call app/ directly, with no service;
a whole in-process runtime over one; and the owners of its workstreams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime
from app.settings import Settings
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import Message, Workstream
from app.users.principal import Principal
from tests.integration.services import REDIS_HOST, REDIS_PORT, lease_redis_db, postgres_available
from tests.integration.services import Database as TestDatabase


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


def runtime(
    backend: str, tmp_path: Path, model_server: Any, api_key: str = "sk-fake", **changes: Any
) -> Iterator[Runtime]:
    """The engine in this process, on a fresh migrated database and a leased Redis database
    (flushed after: the lease goes with it), its model the fake server; `changes` to settings."""
    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    db = TestDatabase(backend, tmp_path)
    try:
        upgrade(db.url)
        env = {
            "DATABASE_URL": db.url,
            "REDIS_URL": f"redis://{REDIS_HOST}:{REDIS_PORT}/{lease_redis_db()}",
            "TURNSTONE_MODEL": "openai:fake-model",
            "OPENAI_BASE_URL": model_server.openai_base_url,
            "OPENAI_API_KEY": api_key,
            "TURNSTONE_WORKING_DIR": str(tmp_path),  # where the operator may name folders
            "TURNSTONE_DATA_ROOT": str(tmp_path / "data"),  # each workstream's own folder
        }
        made = Runtime.create(Settings.from_mapping({}, env).with_changes(**changes))
        model_server.reset()
        try:
            yield made
        finally:
            model_server.reset()
            made.redis.flushdb()
            made.close()
    finally:
        db.drop()


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
    """Who owns which workstream, written where the users feature keeps it
    (`workstreams.owner_id`), so the ownership seam (app/memory/owners.py) reads it as in service."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def set(self, **owned_by: str | None) -> None:
        with self.db.session() as s:
            for ws_id, owner in owned_by.items():
                ws = s.get(Workstream, ws_id)
                assert ws is not None, ws_id
                ws.owner_id = owner
                s.add(ws)


def principal(user_id: str | None) -> Principal:
    """A caller of the API, as a token of that user would be (None: the operator)."""
    return Principal(name=user_id or "operator", user_id=user_id, scopes=frozenset())
