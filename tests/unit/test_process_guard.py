"""The process-group watchdog: a group does not outlive its worker's death, and a released one is
left alone; one watchdog serves a process's commands."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tools.commands.process_guard import GroupGuard
from tests.process_table import is_running, live_members, wait_until

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for a worker: it starts a guarded group, says which, and waits to be killed.
WORKER = """
import subprocess, sys, time
from app.tools.commands.process_guard import GroupGuard
guard = GroupGuard(grace=0.3)
group = subprocess.Popen(["bash", "-c", sys.argv[1]], start_new_session=True)
guard.watch(group.pid)
print(group.pid, guard.pid, flush=True)
time.sleep(300)
"""

# A worker with two commands at once, each with its guard: it forgets the first (as a
# finished call does), then says which groups it started, and waits to be killed.
TWO_COMMANDS = """
import subprocess, sys, time
from app.tools.commands.process_guard import GroupGuard
guards, groups = [], []
for _ in range(2):
    guard = GroupGuard(grace=0.1)
    group = subprocess.Popen(["sleep", "300"], start_new_session=True)
    guard.watch(group.pid)
    guards.append(guard)
    groups.append(group)
guards[0].release()
print(groups[0].pid, groups[1].pid, guards[0].pid, guards[1].pid, flush=True)
time.sleep(300)
"""

# A worker whose watchdog is killed under a running command: the next command's guard
# starts another, which must take over the first command's group too.
REPLACED = """
import os, signal, subprocess, sys, time
from app.tools.commands.process_guard import GroupGuard
from tests.process_table import is_running, wait_until
guard = GroupGuard(grace=0.1)
group = subprocess.Popen(["sleep", "300"], start_new_session=True)
guard.watch(group.pid)
first = guard.pid
os.kill(first, signal.SIGKILL)
wait_until(lambda: not is_running(first), 3)
second = GroupGuard(grace=0.1)
print(group.pid, first, second.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Group ids a test started: whatever is left of them is killed afterwards."""
    started: list[int] = []
    yield started
    for pgid in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def start_worker(command: str, groups: list[int]) -> tuple[subprocess.Popen[str], int, int]:
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, command], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    pgid, guard_pid = (int(n) for n in worker.stdout.readline().split())
    groups.append(pgid)
    assert wait_until(lambda: len(live_members(pgid)) >= 2, 5)  # both sleeps (bash may exec the last)
    return worker, pgid, guard_pid


def test_a_killed_worker_takes_its_group_with_it(groups):
    worker, pgid, guard_pid = start_worker("sleep 300 & sleep 300", groups)
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not live_members(pgid), 3), live_members(pgid)
    assert wait_until(lambda: not is_running(guard_pid), 3)


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(groups):
    worker, pgid, _guard = start_worker("trap '' TERM; sleep 300 & sleep 300", groups)
    killed_at = time.monotonic()
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not live_members(pgid), 3), live_members(pgid)
    assert time.monotonic() - killed_at >= 0.3  # SIGTERM was ignored: SIGKILL followed the grace


def test_a_released_group_is_left_alone_when_the_worker_dies_and_one_watchdog_serves_both(groups):
    worker = subprocess.Popen(
        [sys.executable, "-c", TWO_COMMANDS], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    released, guarded, first_watchdog, second_watchdog = (int(n) for n in worker.stdout.readline().split())
    groups.extend([released, guarded])
    assert first_watchdog == second_watchdog  # no process of its own per command
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not live_members(guarded), 3), live_members(guarded)
    assert wait_until(lambda: not is_running(first_watchdog), 3)
    assert live_members(released)  # forgotten before the worker died: never signalled


def test_a_killed_watchdog_is_replaced_and_the_new_one_guards_every_group_still_watched(groups):
    worker = subprocess.Popen([sys.executable, "-c", REPLACED], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    pgid, first, second = (int(n) for n in worker.stdout.readline().split())
    groups.append(pgid)
    assert second != first and is_running(second)
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not live_members(pgid), 3), live_members(pgid)  # the new one knew of it


def test_the_guard_belongs_to_the_process_not_the_thread_that_started_it(groups):
    # PR_SET_PDEATHSIG would fire here: the thread that forked the command ends.
    group = subprocess.Popen(["sleep", "300"], start_new_session=True)
    groups.append(group.pid)
    made: list[GroupGuard] = []

    def start() -> None:
        made.append(GroupGuard(grace=0.1))
        made[0].watch(group.pid)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    time.sleep(0.3)
    assert group.poll() is None and is_running(made[0].pid)
    made[0].release()
    group.kill()
    group.wait()


def test_a_guard_released_before_it_watched_anything_tells_the_watchdog_nothing():
    with GroupGuard() as guard:
        pass
    assert is_running(guard.pid)  # it waits for the next command


def test_the_watchdog_sees_none_of_the_worker_environment(monkeypatch):
    monkeypatch.setenv("SOME_API_KEY", "sk-guard-0123456789")
    with GroupGuard() as guard:
        # Until it execs the shell, a forked child still shows its parent's environment.
        assert wait_until(lambda: Path(f"/proc/{guard.pid}/cmdline").read_bytes().startswith(b"/bin/sh"), 5)
        environ = Path(f"/proc/{guard.pid}/environ").read_bytes()
    assert b"sk-guard" not in environ
