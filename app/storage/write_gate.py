"""SQLite's writers take turns at a gate: first come, first served inside a process, and a file
lock across processes, so a released write lock goes straight to a waiter.

Without it every writer waits in SQLite's busy handler, which sleeps (up to 100 ms a time)
and retries: a writer that arrives just as the lock is freed takes it from one that has waited
for seconds. Under load (16 worker threads, the web tier's sends) some transactions waited 2-4 s
while others went straight through, and a turn whose transactions lost that lottery took seconds
longer than its neighbours.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO

# A holder that never lets go (a bug) must not stop every other writer for good: after this
# long a waiter goes on without the gate, to SQLite's own busy handling (as before the gate).
GATE_WAIT_SECONDS = 30.0


class FifoLock:
    """A lock handed to its waiters in the order they came; re-entrant for its holder thread."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: deque[tuple[int, threading.Lock]] = deque()
        self._owner: int | None = None
        self._depth = 0

    def acquire(self, timeout: float) -> bool:
        """True once this thread holds the lock; False when `timeout` ran out first."""
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return True
            if self._owner is None and not self._waiters:
                self._owner, self._depth = me, 1
                return True
            ticket = threading.Lock()
            ticket.acquire()
            waiter = (me, ticket)
            self._waiters.append(waiter)
        if ticket.acquire(timeout=timeout):
            return True  # release() made us the owner before waking us
        with self._mutex:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return False
        return True  # handed over just as the wait ran out

    def release(self) -> bool:
        """Let go once; True when the lock has left this thread (its outermost hold)."""
        with self._mutex:
            self._depth -= 1
            if self._depth > 0:
                return False
            if self._waiters:
                owner, ticket = self._waiters.popleft()
                self._owner, self._depth = owner, 1
                ticket.release()
            else:
                self._owner = None
            return True

    @property
    def depth(self) -> int:
        """How many times the calling thread holds the lock (0: it does not)."""
        return self._depth if self._owner == threading.get_ident() else 0


class FileLock:
    """An exclusive `flock` on a file, whose wait can run out.

    `flock` itself waits without a limit, so a contended wait is done by a helper thread while
    the caller waits (with its limit) to be told it holds the lock; a caller that gave up leaves
    the helper to let go of the lock when it comes. One caller at a time (the `FifoLock` head)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file: IO[bytes] | None = None
        self._pid = 0
        self._cond = threading.Condition()
        self._wanted = False  # a caller is waiting for the helper to take the lock
        self._granted = False
        self._in_flight = False  # the helper is inside a blocking flock

    def acquire(self, timeout: float) -> bool:
        fd = self._fd()
        with self._cond:
            if not self._in_flight:  # (a helper's flock in flight would count ours as its own)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    pass
            self._wanted, self._granted = True, False
            self._cond.notify_all()
            if self._cond.wait_for(lambda: self._granted, timeout):
                self._granted = False
                return True
            self._wanted = False  # the helper lets go of the lock when it comes
            return False

    def release(self) -> None:
        fcntl.flock(self._fd(), fcntl.LOCK_UN)

    def _fd(self) -> int:
        # A forked child (gunicorn's, Celery's) opens its own file and starts its own helper: a
        # flock belongs to the open file, which a fork shares with its parent.
        if self._file is None or self._pid != os.getpid():
            self._file = open(self._path, "ab")  # noqa: SIM115 - held for the process's life
            self._pid = os.getpid()
            self._in_flight = self._wanted = self._granted = False
            threading.Thread(target=self._take, args=(self._file.fileno(),), daemon=True).start()
        return self._file.fileno()

    def _take(self, fd: int) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._wanted and not self._in_flight)
                self._in_flight = True
            fcntl.flock(fd, fcntl.LOCK_EX)
            with self._cond:
                self._in_flight = False
                if self._wanted:
                    self._wanted, self._granted = False, True
                    self._cond.notify_all()
                else:
                    fcntl.flock(fd, fcntl.LOCK_UN)


class WriteGate:
    """One per SQLite file and process: `enter()` before a write transaction, `leave()` after."""

    def __init__(self, db_path: str) -> None:
        self._local = FifoLock()
        self._file = FileLock(Path(db_path + "-writers"))  # beside SQLite's -wal and -shm files

    def enter(self) -> bool:
        """Wait for this process's earlier writers, then for other processes'; False when the
        wait ran out (the caller goes on without the gate, and must not `leave()`)."""
        deadline = time.monotonic() + GATE_WAIT_SECONDS
        if not self._local.acquire(GATE_WAIT_SECONDS):
            return False
        if self._local.depth > 1:
            return True  # a write nested in this thread's own: the file lock is held once
        if self._file.acquire(max(0.0, deadline - time.monotonic())):
            return True
        self._local.release()
        return False

    def leave(self) -> None:
        if self._local.depth == 1:
            self._file.release()
        self._local.release()
