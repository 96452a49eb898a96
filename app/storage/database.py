"""The database engine: SQLite (WAL, immediate write transactions taken in turn) or PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BindParameter, DateTime, Insert, Update, bindparam, event, exc, func, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

from app.storage.write_gate import WriteGate

SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_ONLY_OPTION = "turnstone_read_only"
# Marks the connections of `Database.one_statement` on PostgreSQL: each write commits by itself.
ONE_STATEMENT_OPTION = "turnstone_one_statement"
# A pooled PostgreSQL connection that sat unused this long is checked before it is handed out.
IDLE_CHECK_SECONDS = 1.0
_RETURNED_AT = "turnstone_returned_at"  # in a connection record's info: when it was last checked in


def make_engine(url: str) -> Engine:
    """An engine whose errors never quote a statement's parameters: they are user content (a
    file a model read, a message) and error texts reach logs."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, hide_parameters=True
        )
        _tune_sqlite(engine)
        return engine
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    engine = create_engine(url, pool_size=10, max_overflow=20, hide_parameters=True)
    _check_idle_connections(engine)
    return engine


def _check_idle_connections(engine: Engine) -> None:
    """Check a pooled connection before handing it out only when it sat idle, not every time.

    A connection back in the pool for IDLE_CHECK_SECONDS or more gets a `SELECT 1` (what
    SQLAlchemy's `pool_pre_ping` does at every checkout), and one the server dropped is replaced
    with every connection older than it. One back within less was in use a moment ago: a server
    restart or failover takes longer than that, and one that died meanwhile fails its next
    statement as one dying during it would (a step meets a passing fault and runs again later;
    a request fails). Checking every checkout cost a round trip a transaction, a dozen a bash
    turn.
    """

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_conn: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _handed_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get(_RETURNED_AT)  # None: connected just now
        if returned is None or time.monotonic() - returned < IDLE_CHECK_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as error:
            # The pool connects anew, and replaces every connection older than this one too.
            raise exc.InvalidatePoolError(
                f"a pooled connection was dropped: {type(error).__name__}"
            ) from error


def _tune_sqlite(engine: Engine) -> None:
    # Several processes write one file: WAL lets readers go on, and BEGIN
    # IMMEDIATE takes the write lock up front so that a transaction never fails
    # half-way with "database is locked" when it upgrades from read to write.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL survives any process crash (a killed worker); only
        # an OS crash or power cut can lose the last commits. PostgreSQL is the
        # production store.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A reader's transaction takes no write lock: it must not queue behind writers.
        read_only = conn.get_execution_options().get(READ_ONLY_OPTION)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


class Database:
    """Hands out sessions; one per unit of work, committed or rolled back whole."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        reader_options: dict[str, Any] = {READ_ONLY_OPTION: True}
        if self.engine.dialect.name == "postgresql":
            # Each statement its own transaction: no BEGIN before a read nor ROLLBACK after it
            # (two of a one-query read's three round trips). Under READ COMMITTED every
            # statement took its own snapshot anyway, so a reader sees exactly what it saw.
            reader_options["isolation_level"] = "AUTOCOMMIT"
        self._reader_engine = self.engine.execution_options(**reader_options)
        # PostgreSQL: a write that is one statement commits by itself (`one_statement`).
        self._autocommit_engine = self.engine.execution_options(
            isolation_level="AUTOCOMMIT", **{ONE_STATEMENT_OPTION: True}
        )
        path = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
        # PostgreSQL queues its lock waiters itself; SQLite's writers need the gate to take turns.
        self._gate = WriteGate(path) if path and path != ":memory:" else None

    @contextmanager
    def session(self) -> Iterator[Session]:
        # The gate held, or None: none on PostgreSQL, or when the wait for it ran out.
        gate = self._gate if self._gate is not None and self._gate.enter() else None
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                try:
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        finally:
            if gate is not None:
                gate.leave()

    @contextmanager
    def reader(self) -> Iterator[Session]:
        """A session that only reads: on SQLite it takes no write lock, so it never waits
        behind a writer (WAL gives it the last committed state)."""
        # Closing (not rolling back) leaves what was read loaded; the pool ends the
        # transaction when the connection goes back.
        with Session(self._reader_engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def one_statement(self) -> Iterator[Session]:
        """A session for a write that is one statement. On PostgreSQL, whose statements (data-
        modifying CTEs included) are atomic, that statement commits by itself: no BEGIN or
        COMMIT round trip before and after it. Elsewhere it is `session()`."""
        if not self.is_postgresql:
            with self.session() as session:
                yield session
            return
        with Session(self._autocommit_engine, expire_on_commit=False) as session:
            yield session

    @property
    def is_postgresql(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def now(self) -> Any:
        """The time to write into a lease column: the database server's clock on PostgreSQL,
        so that workers on machines whose clocks differ compare one clock (a SQLite file is
        only ever shared by processes of one machine, whose clock it is)."""
        return func.clock_timestamp() if self.is_postgresql else datetime.now(UTC)

    def now_bound(self) -> Any:
        """`now()` for a statement built once: the server's clock on PostgreSQL, read by the
        statement; elsewhere the bind parameter `now`, which the caller passes as `now()`."""
        return func.clock_timestamp() if self.is_postgresql else bindparam("now", type_=DateTime())

    def ago(self, seconds: float) -> Any:
        """`now()` less `seconds`, for comparing lease columns against."""
        return self.now() - timedelta(seconds=seconds)

    def dispose(self) -> None:
        self.engine.dispose()


def insert_row(s: Session, model: type[SQLModel], **values: Any) -> None:
    """Insert one row of `model` in the session's transaction, without the ORM's unit of work
    (about 0.2 ms of CPU a row less): for a row nothing reads back in the same session and
    whose references are stored already (nothing pending is flushed first). Columns left out
    take their defaults."""
    statement = _INSERTS.get(model)
    if statement is None:
        statement = _INSERTS[model] = insert(model)
    s.connection().execute(statement, values)


_INSERTS: dict[type[SQLModel], Insert] = {}


def update_rows(s: Session, statement: Update) -> int:
    """Run `statement` in the session's transaction, after what the session holds is written
    (as an ORM update would, so the writes keep their order), but without the ORM's look
    through the session's objects for the rows it changes (about 0.25 ms of CPU a statement):
    an object of those rows in the session keeps the values it had, unless the caller sets
    them (`sqlalchemy.orm.attributes.set_committed_value`). How many rows it changed."""
    s.flush()
    return int(s.connection().execute(statement).rowcount)


def typed(model: type[SQLModel], column: str, name: str | None = None) -> BindParameter[Any]:
    """A bind parameter (`name`, else the column's) converted as `model`'s `column` is."""
    return bindparam(name or column, type_=model.__table__.c[column].type)  # type: ignore[attr-defined]
