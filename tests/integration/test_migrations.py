"""The schema's migrations on a database that already holds a conversation: up from the last
schema released before this one, all the way down, and up again, on SQLite and PostgreSQL.

On SQLite a migration that copies `workstreams` (an Alembic batch) cannot drop the old table
once messages and turns refer to it: such a step fails on every real deployment, never on an
empty test database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from app.storage.migrate import alembic_config
from tests.integration.services import Database as TestDatabase
from tests.integration.services import postgres_available

pytestmark = pytest.mark.integration
RELEASED = "0003_durability_and_tools"  # the schema deployments had before the 0004 migrations


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_every_migration_goes_up_and_down_over_stored_conversations(backend, tmp_path):
    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    made = TestDatabase(backend, tmp_path)
    config = alembic_config(made.url)
    try:
        command.upgrade(config, RELEASED)
        engine = create_engine(made.url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.begin() as c:
            if backend == "sqlite":
                c.execute(text("PRAGMA foreign_keys=ON"))  # as the service runs it
            now = {"t": datetime.now(UTC)}
            c.execute(
                text(
                    "INSERT INTO workstreams (id, name, kind, auto_approve, auto_approve_tools, read_paths, "
                    "expanded_tools, working_dir, state, created_at, updated_at) VALUES ('old', 'old', "
                    "'interactive', false, '[]', '[]', '[]', '/tmp', 'idle', :t, :t)"
                ),
                now,
            )
            c.execute(
                text(
                    "INSERT INTO turns (id, ws_id, status, phase, message, origin, step, attempt, "
                    "step_claims, "
                    "cancel_requested, created_at) VALUES ('t1', 'old', 'done', 'finished', 'hello', 'user', "
                    "1, 1, 0, false, :t)"
                ),
                now,
            )
            c.execute(
                text(
                    "INSERT INTO messages (ws_id, turn_id, role, content, is_error, created_at) "
                    "VALUES ('old', 't1', 'user', 'hello', false, :t)"
                ),
                now,
            )
        engine.dispose()
        heads = ScriptDirectory.from_config(config).get_heads()
        assert len(heads) == 1, f"the migrations must form one line, not {heads}"
        command.upgrade(config, "head")
        command.downgrade(config, RELEASED)
        command.upgrade(config, "head")
        engine = create_engine(made.url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.begin() as c:
            assert c.execute(text("SELECT content FROM messages WHERE ws_id = 'old'")).scalar_one() == "hello"
        engine.dispose()
    finally:
        made.drop()
