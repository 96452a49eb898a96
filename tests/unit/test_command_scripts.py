"""Command scripts left on disk by a worker that was killed: its watchdog removes them as it
stops the worker's commands, and a worker starting removes what older dead ones left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.tools.commands import scripts
from tests.process_table import wait_until

ROOT = Path(__file__).resolve().parents[2]

# A worker running one command through bash's own path: it says where its scripts are, and
# waits to be killed, either as soon as the script is on disk (`WRITTEN`: the earliest moment
# there is anything to remove) or once the command runs.
WORKER = """
import os, sys, threading, time
from app.tools import bash
from app.tools.commands import scripts
from app.tools.core.base import ToolContext
if sys.argv[1] == "written":
    real_write = scripts.write
    def write(text):
        path = real_write(text)
        print(scripts.folder(), flush=True)
        time.sleep(300)
    scripts.write = write
ctx = ToolContext(ws_id="w", working_dir=os.getcwd())
threading.Thread(target=bash.run, args=("sleep 300", 300, ctx), daemon=True).start()
if sys.argv[1] == "running":
    while not os.listdir(scripts.folder()):
        time.sleep(0.01)
    print(scripts.folder(), flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("moment", ["written", "running"])
def test_a_killed_workers_scripts_go_with_its_commands(tmp_path, moment):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, moment], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env
    )
    assert worker.stdout is not None
    folder = Path(worker.stdout.readline().strip())
    assert folder.parent == tmp_path / scripts.ROOT_NAME and len(list(folder.iterdir())) == 1
    worker.kill()
    worker.wait()
    assert wait_until(lambda: not folder.exists(), 5), list(folder.iterdir())


def test_a_starting_worker_removes_what_dead_workers_left_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scripts.tempfile, "tempdir", None)  # read TMPDIR again
    ours = Path(scripts.write("echo mine"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / scripts.ROOT_NAME / str(dead.pid)
    gone.mkdir()
    (gone / "command-x.sh").write_text("echo left behind")
    old, new = tmp_path / "turnstone-bash-old.sh", tmp_path / "turnstone-bash-new.sh"
    old.write_text("echo old")
    new.write_text("echo new")
    os.utime(old, (time.time() - 2 * scripts.LEGACY_AGE_SECONDS,) * 2)
    assert scripts.sweep() == 2
    assert not gone.exists() and not old.exists()
    assert ours.exists() and new.exists()  # this process's, and one that may still be running
