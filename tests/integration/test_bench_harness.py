"""A benchmark stopped with SIGTERM (a `kill`, a `timeout`) stops the service it started: its
processes live in sessions of their own, so they would outlive it, and a later run could take
the dead run's Redis database while the orphaned worker still consumed it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress

import pytest

from tests.integration.client import wait_until
from tests.integration.services import ROOT
from tests.process_table import children, is_running

pytestmark = pytest.mark.integration

SERVICE = ("gunicorn", "-m workers", "-m beat")  # what a running service's processes run


def test_a_benchmark_stopped_by_sigterm_stops_the_service_it_started():
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench.turn_latency", "--sizes", "0", "--turns", "100000"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started: dict[int, str] = {}
    try:

        def service_up() -> dict[int, str]:
            found = {pid: cmd for pid, cmd in children(bench.pid).items() if any(s in cmd for s in SERVICE)}
            started.update(found)
            return found if len(found) >= 4 else {}  # web, worker, beat, gateway

        wait_until(service_up, timeout=60, what="the bench's service started")
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=30) == 128 + signal.SIGTERM
        wait_until(
            lambda: not any(is_running(pid) for pid in started),
            timeout=20,
            what=f"the service's processes gone: {started}",
        )
    finally:
        bench.kill()
        for pid in started:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
