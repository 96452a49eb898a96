"""PostgreSQL connections: one the server dropped while it sat in the pool is never handed out,
and one back in use within a moment costs no round trip to check."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from app.storage import database
from app.storage.database import Database
from tests.integration.services import PG_ADMIN_URL, postgres_available
from tests.integration.services import Database as TestDatabase

pytestmark = pytest.mark.integration


@pytest.fixture
def db(tmp_path, request) -> Iterator[Database]:
    if not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    made = TestDatabase("postgresql", tmp_path)
    request.addfinalizer(made.drop)
    db = Database(made.url)
    yield db
    db.dispose()


def backend_pid(db: Database, use: str) -> int:
    opened = db.session() if use == "session" else db.reader()
    with opened as s:
        return int(s.execute(text("select pg_backend_pid()")).scalar_one())


def terminate(pid: int) -> None:
    """What a server restart does to a connection: its backend ends, the client is not told."""
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute("select pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while admin.execute("select 1 from pg_stat_activity where pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, f"backend {pid} did not end"
            time.sleep(0.01)


@pytest.mark.parametrize("use", ["session", "reader"])
def test_a_connection_the_server_dropped_while_idle_is_replaced_unseen(db, use, monkeypatch):
    monkeypatch.setattr(database, "IDLE_CHECK_SECONDS", 0.2)
    first = backend_pid(db, use)
    terminate(first)
    time.sleep(0.3)
    assert backend_pid(db, use) != first  # no error: the pool connected anew


def test_a_connection_back_in_use_within_a_moment_is_not_checked(db, monkeypatch):
    checks: list[Any] = []
    ping = db.engine.dialect.do_ping

    def counted(dbapi_conn: Any) -> bool:
        checks.append(dbapi_conn)
        return ping(dbapi_conn)

    monkeypatch.setattr(db.engine.dialect, "do_ping", counted)
    pids = {backend_pid(db, "session" if n % 2 else "reader") for n in range(20)}
    assert len(pids) == 1 and checks == []  # one connection, used 20 times, never checked
    monkeypatch.setattr(database, "IDLE_CHECK_SECONDS", 0.2)
    time.sleep(0.3)
    assert backend_pid(db, "session") in pids
    assert len(checks) == 1  # idle past the limit: checked once, and found alive
