"""`turnstone-jobs run`'s supervisor (app/supervisor.py) as the command line execs it, with real
shell services: output prefixed, a service that ends ends the run, Ctrl-C asks, twice insists."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.runs import SUPERVISOR


def _start(tmp_path: Path, processes: list[tuple[str, str]]) -> subprocess.Popen[str]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    record = tmp_path / "record.json"
    record.write_text("{}")
    spec = {"processes": processes, "cwd": str(tmp_path), "redis": None, "scratch": str(scratch),
            "record": str(record)}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-S", str(SUPERVISOR), json.dumps(spec)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


def _wait_for(proc: subprocess.Popen[str], text: str, seen: list[str], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} never came: {seen}")


def test_a_service_that_ends_on_its_own_stops_the_others_and_gives_the_run_its_status(tmp_path):
    proc = _start(tmp_path, [("steady", "echo up; exec sleep 30"), ("short", "printf 'no newline'; exit 3")])
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 3, out
    lines = out.splitlines()
    assert any(line.endswith("steady | up") for line in lines), out  # each line prefixed by its service
    assert any(line.endswith("short  | no newline") for line in lines), out  # a last line without \n too
    assert any("short  | stopped (exit status 3)" in line for line in lines), out
    assert any("steady | stopped (exit status -15)" in line for line in lines), out  # SIGTERM, once
    assert not (tmp_path / "scratch").exists() and not (tmp_path / "record.json").exists()


def test_ctrl_c_asks_each_service_to_stop_and_a_second_one_stops_them_at_once(tmp_path):
    # A service that takes its time to stop (it ignores SIGTERM, as a worker finishing a call
    # does not stop at once): the first Ctrl-C waits for it, the second does not.
    proc = _start(
        tmp_path, [("slow", "trap '' TERM; echo ready; sleep 60 & wait"), ("quick", "exec sleep 60")]
    )
    seen: list[str] = []
    _wait_for(proc, "slow  | ready", seen)
    proc.send_signal(signal.SIGINT)
    _wait_for(proc, "quick | stopped", seen)
    time.sleep(1)
    assert proc.poll() is None, seen  # still waiting for the slow one
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    screen = "".join(seen) + out
    assert "stopping: each service finishes what it is doing" in screen
    assert "stopping at once" in screen and "slow  | stopped (exit status -9)" in screen, screen
    assert "Traceback" not in screen
