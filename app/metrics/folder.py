"""The multiprocess folder (PROMETHEUS_MULTIPROC_DIR): where every process of a host writes its
counts, made fresh for a run and kept clear of dead processes' live gauges."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from prometheus_client import multiprocess

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiproc_dir() -> Path | None:
    # prometheus_client reads this variable itself when it is imported; this only finds the folder.
    value = os.environ.get(MULTIPROC_DIR_ENV) or os.environ.get(MULTIPROC_DIR_ENV.lower())
    return Path(value) if value else None


def make_fresh(folder: Path) -> None:
    """An empty folder for a run: files of an earlier run would be summed with this one's."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def forget_process(pid: int) -> None:
    """A dead process's live gauges (its open websockets) stop counting; its counters stay."""
    if multiproc_dir() is not None:
        multiprocess.mark_process_dead(pid)


def forget_dead_processes() -> None:
    """At a web master's start: the live gauges of processes that died unannounced (a killed
    master's workers) stop counting."""
    where = multiproc_dir()
    if where is None:
        return
    for path in where.glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[1]
        if pid.isdigit() and not _is_alive(int(pid)):
            multiprocess.mark_process_dead(int(pid), str(where))


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
