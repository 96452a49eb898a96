"""The in-process half of SQLite's write gate: a lock handed over in the order its waiters came."""

from __future__ import annotations

import threading

from app.storage.write_gate import FifoLock


def queued(lock: FifoLock, n: int) -> None:
    """Until `n` threads wait on `lock` (a test's own view of the queue, to start them in order)."""
    done = threading.Event()
    while not done.wait(0.001):
        with lock._mutex:
            if len(lock._waiters) >= n:
                return


def test_waiters_get_the_lock_in_the_order_they_came():
    lock = FifoLock()
    assert lock.acquire(timeout=1)
    order: list[int] = []

    def waiter(n: int) -> None:
        assert lock.acquire(timeout=10)
        order.append(n)
        lock.release()

    threads = []
    for n in range(8):
        t = threading.Thread(target=waiter, args=(n,))
        t.start()
        queued(lock, n + 1)
        threads.append(t)
    lock.release()
    for t in threads:
        t.join(timeout=10)
    assert order == list(range(8))


def test_the_holder_may_take_it_again_and_keeps_it_until_its_last_release():
    lock = FifoLock()
    assert lock.acquire(timeout=1) and lock.acquire(timeout=1)
    assert lock.depth == 2
    taken = threading.Event()
    other = threading.Thread(target=lambda: lock.acquire(timeout=10) and taken.set())
    other.start()
    queued(lock, 1)
    assert lock.release() is False and not taken.is_set()
    assert lock.release() is True
    assert taken.wait(10)
    other.join()
    assert lock.depth == 0  # held by the other thread, not this one


def test_a_wait_that_runs_out_leaves_the_queue():
    lock = FifoLock()
    assert lock.acquire(timeout=1)
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(lock.acquire(timeout=0.05)))
    t.start()
    t.join(timeout=10)
    assert result == [False]
    lock.release()
    assert lock.acquire(timeout=1)  # free again: nobody was left queued to hand it to
