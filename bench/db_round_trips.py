"""What one database round trip costs through the service's own engine, when the connection was
in use a moment ago and when it sat idle: a read (`SELECT 1`) and a one-row write that commits,
on SQLite and on PostgreSQL, each after 0, 5 and 50 ms of idling.

Run: python -m bench.db_round_trips [--repeat 60] [--backend sqlite postgresql]

Why idling: a send is the web's only write of a turn, so the web's PostgreSQL connection (and the
server process behind it) has been idle for a whole turn when the next send comes, and the
worker's for as long as the model took. Where the machine's idle CPUs sleep (a virtual machine's
do), waking the server process to answer costs more than the round trip itself; SQLite runs in
the caller's process and wakes nothing. The PostgreSQL rows are repeated with the commit's flush
of the write-ahead log off (`synchronous_commit=off`) to show that flush's part; the service
keeps it on (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from app.storage.database import Database
from tests.integration.services import Database as TestDatabase
from tests.integration.services import postgres_available

GAPS_MS = (0, 5, 50)
_CREATE = "CREATE TABLE bench_rows (note VARCHAR(20))"
_INSERT = text("INSERT INTO bench_rows (note) VALUES ('x')")


@contextmanager
def database(backend: str, flush: bool = True) -> Iterator[Database]:
    """A fresh database of `backend` through the service's engine; on PostgreSQL with the
    commit's log flush off unless `flush`."""
    with tempfile.TemporaryDirectory() as tmp:
        made = TestDatabase(backend, Path(tmp))
        try:
            url = made.url
            if not flush:
                url += "?options=-c%20synchronous_commit%3Doff"
            db = Database(url)
            with db.session() as s:
                s.execute(text(_CREATE))
            try:
                yield db
            finally:
                db.dispose()
        finally:
            made.drop()


def read(db: Database) -> None:
    with db.reader() as s:
        s.execute(text("SELECT 1")).one()


def write(db: Database) -> None:
    with db.one_statement() as s:  # on SQLite a transaction of its own
        s.execute(_INSERT)


def timed(op: Callable[[Database], None], db: Database, gap_ms: float, repeat: int) -> list[float]:
    """Milliseconds per call, each after `gap_ms` of idling; the first five (warm-up) left out."""
    times = []
    for _ in range(repeat + 5):
        if gap_ms:
            time.sleep(gap_ms / 1000)
        start = time.perf_counter()
        op(db)
        times.append((time.perf_counter() - start) * 1000)
    return times[5:]


def row(label: str, db: Database, repeat: int) -> str:
    cells = []
    for op in (read, write):
        for gap in GAPS_MS:
            cells.append(f"{statistics.median(timed(op, db, gap, repeat)):7.3f}")
    return f"{label:<34}" + "".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=60, help="measured calls per cell")
    parser.add_argument(
        "--backend", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"]
    )
    args = parser.parse_args()
    gaps = "".join(f"{g:>5} ms" for g in GAPS_MS)
    print("median ms per call; idle before each call:")
    print(f"{'':<34}{'read (SELECT 1)':<24}one-row write, committed")
    print(f"{'':<34}{gaps}{gaps}")
    for backend in args.backend:
        if backend == "postgresql" and not postgres_available():
            print("postgresql: not reachable, skipped")
            continue
        with database(backend) as db:
            print(row(backend, db, args.repeat))
        if backend == "postgresql":
            with database(backend, flush=False) as db:
                print(row("postgresql, commit flush off", db, args.repeat))


if __name__ == "__main__":
    main()
