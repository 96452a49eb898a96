"""SQLite's write gate against real SQLite files and real processes: writers of a process commit in
the order they came, a writer in another process is waited for, and a gate held too long is
gone around. PostgreSQL has no gate (it queues lock waiters itself): these tests are SQLite's."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.storage import write_gate
from app.storage.database import Database

PROBE = "CREATE TABLE IF NOT EXISTS probe (n INTEGER NOT NULL)"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    made = Database(f"sqlite:///{tmp_path / 'gate.db'}")
    with made.session() as s:
        s.execute(text(PROBE))
    yield made
    made.dispose()


def insert(db: Database, n: int) -> None:
    with db.session() as s:
        s.execute(text("INSERT INTO probe (n) VALUES (:n)"), {"n": n})


def committed(db: Database) -> list[int]:
    with db.reader() as s:
        return [row[0] for row in s.execute(text("SELECT n FROM probe ORDER BY rowid"))]


def wait_queued(db: Database, n: int) -> None:
    """Until `n` writers of this process wait at the gate. (Without a gate, as before it, there is
    nothing to look at: a pause lets each writer reach SQLite's busy wait before the next starts.)"""
    gate = getattr(db, "_gate", None)
    if gate is None:
        time.sleep(0.1)
        return
    deadline = time.monotonic() + 10
    while len(gate._local._waiters) < n and time.monotonic() < deadline:
        time.sleep(0.001)


def test_writers_of_a_process_commit_in_the_order_they_came(db: Database) -> None:
    release = threading.Event()
    holding = threading.Event()

    def holder() -> None:
        with db.session() as s:
            s.execute(text("INSERT INTO probe (n) VALUES (-1)"))
            holding.set()
            release.wait(30)

    first = threading.Thread(target=holder)
    first.start()
    assert holding.wait(10)
    writers = []
    for n in range(8):
        t = threading.Thread(target=insert, args=(db, n))
        t.start()
        wait_queued(db, n + 1)
        writers.append(t)
    release.set()
    for t in [first, *writers]:
        t.join(timeout=60)
    # SQLite's busy handler alone served them in no order: each waiter sleeps between tries,
    # longer the longer it has waited, so the latest comers took the lock first.
    assert committed(db) == [-1, *range(8)]


HOLD_TRANSACTION = """
import sys
from sqlalchemy import text
from app.storage.database import Database
db = Database(sys.argv[1])
with db.session() as s:
    s.execute(text("INSERT INTO probe (n) VALUES (100)"))
    print("holding", flush=True)
    sys.stdin.readline()
print("committed", flush=True)
"""

HOLD_FILE_LOCK = """
import fcntl, sys
f = open(sys.argv[1], "ab")
fcntl.flock(f.fileno(), fcntl.LOCK_EX)
print("holding", flush=True)
sys.stdin.readline()
"""


def child(code: str, arg: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, arg], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
    return proc


def test_a_writer_waits_for_another_process_and_goes_on_when_it_commits(db: Database) -> None:
    other = child(HOLD_TRANSACTION, db.url)
    try:
        done = threading.Event()

        def write() -> None:
            insert(db, 1)
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert not done.wait(0.3)  # the other process holds the write lock
        assert other.stdin is not None
        other.stdin.write("\n")
        other.stdin.flush()
        assert done.wait(30)
        writer.join()
    finally:
        other.communicate(timeout=30)
    assert committed(db) == [100, 1]


def test_a_gate_held_too_long_is_gone_around(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process stuck holding the gate (but not SQLite's lock) stops nobody for good."""
    monkeypatch.setattr(write_gate, "GATE_WAIT_SECONDS", 0.2)
    stuck = child(HOLD_FILE_LOCK, str(Path(db.url.removeprefix("sqlite:///") + "-writers")))
    try:
        insert(db, 7)
        assert committed(db) == [7]
        insert(db, 8)  # and the next waits again, and goes around again
        assert committed(db) == [7, 8]
    finally:
        assert stuck.stdin is not None
        stuck.stdin.write("\n")
        stuck.stdin.flush()
        stuck.wait(timeout=30)
    insert(db, 9)  # the lock freed: the gate works as ever
    assert committed(db) == [7, 8, 9]
