"""The test services die with the run that started them: a pytest killed without its teardown
must not leave a worker polling a Redis database that the next run will lease (it would take
that run's tasks: turns that never move, schedules firing twice, in someone else's run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.integration.services import ROOT

# A stand-in for a test run: it starts a "service" as services.py does, says its pid, and waits.
RUN = """
import os, subprocess, sys
from tests.integration.services import _ends_with
service = subprocess.Popen(["sleep", "120"], start_new_session=True, preexec_fn=_ends_with(os.getpid()))
print(service.pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has ended: its parent is gone, init reaps it
        return stat.read().split()[2] != "Z"


def test_a_service_ends_when_its_test_run_is_killed() -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", RUN], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    service = int(run.stdout.readline())
    try:
        assert _alive(service)
        run.send_signal(signal.SIGKILL)  # no teardown runs
        run.wait()
        deadline = time.monotonic() + 10
        while _alive(service) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(service), "the service outlived the run that started it"
    finally:
        if _alive(service):
            os.kill(service, signal.SIGKILL)
