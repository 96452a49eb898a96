"""PostgreSQL connections: one the server dropped while it sat in the pool is never handed out,
one back in use within a moment costs no round trip to check, and a request that meets one the
server dropped just then is answered 503, its retry going through."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import redis
from sqlalchemy import text

from app import create_app
from app.settings import Settings
from app.storage import database
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.web.faults import RETRY_AFTER_SECONDS, UNREACHABLE
from tests.integration.services import (
    API_TOKEN,
    PG_ADMIN_URL,
    REDIS_HOST,
    REDIS_PORT,
    lease_redis_db,
    postgres_available,
)
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


def test_a_request_that_meets_a_connection_dropped_just_now_is_a_503_and_its_retry_goes_through(
    tmp_path, request
):
    if not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    made = TestDatabase("postgresql", tmp_path)
    request.addfinalizer(made.drop)
    upgrade(made.url)
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{lease_redis_db()}"
    request.addfinalizer(lambda: redis.Redis.from_url(redis_url).flushdb())  # the lease with it
    env = {
        "DATABASE_URL": made.url,
        "REDIS_URL": redis_url,
        "TURNSTONE_API_TOKEN": API_TOKEN,
        "TURNSTONE_WORKING_DIR": str(tmp_path),
    }
    app = create_app(Settings.from_mapping({}, env))
    request.addfinalizer(app.extensions["runtime"].close)
    client = app.test_client()
    auth = {"Authorization": f"Bearer {API_TOKEN}"}
    ws_id = client.post("/v1/api/workstreams", json={"name": "dropped"}, headers=auth).get_json()["ws_id"]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:  # a restart, a failover
        dropped = admin.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s", (made.name,)
        ).fetchall()
    assert dropped  # the web's pooled connection, used a moment ago: not checked before use
    send = {"json": {"message": "hello"}, "headers": {**auth, "Idempotency-Key": "once"}}
    refused = client.post(f"/v1/api/workstreams/{ws_id}/send", **send)
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert refused.get_json() == {"error": UNREACHABLE}
    retried = client.post(f"/v1/api/workstreams/{ws_id}/send", **send)
    assert retried.status_code == 202, retried.get_data()
    history = client.get(f"/v1/api/workstreams/{ws_id}/history", headers=auth).get_json()["messages"]
    assert [(m["role"], m["content"]) for m in history] == [("user", "hello")]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_failed_statement_never_carries_its_parameters_into_the_error_text(backend, tmp_path, request):
    """Error texts reach logs; a statement's parameters are user content (a file a model read,
    a message) and may hold secrets."""
    if backend == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    made = TestDatabase(backend, tmp_path)
    request.addfinalizer(made.drop)
    db = Database(made.url)
    request.addfinalizer(db.dispose)
    with db.session() as s:
        s.execute(text("create table notes (id integer primary key, body text)"))
        s.execute(text("insert into notes values (1, 'first')"))
    secret = "sk-live-0123456789abcdef-from-a-dotenv"
    with pytest.raises(Exception) as raised, db.session() as s:
        s.execute(text("insert into notes values (:id, :body)"), {"id": 1, "body": secret})
    assert "notes" in str(raised.value)  # still says what failed
    assert secret not in str(raised.value)
