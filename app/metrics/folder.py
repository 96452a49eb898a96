"""The multiprocess folder (PROMETHEUS_MULTIPROC_DIR): where every process of a host writes its
counts, made fresh for a run and kept clear of dead processes' live gauges.

prometheus_client is imported where it is used, not here: the gunicorn master runs the clean-ups
below as hooks and has no other use for it (about 4 MB in a process that only forks workers)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiproc_dir() -> Path | None:
    # prometheus_client reads this variable itself when it is imported; this only finds the folder.
    value = os.environ.get(MULTIPROC_DIR_ENV) or os.environ.get(MULTIPROC_DIR_ENV.lower())
    return Path(value) if value else None


def process_id(pid: int | None = None) -> str:
    """How a process names its files: containers sharing the folder (compose's web and worker)
    each number their processes from 1, so the host name comes first."""
    return f"{socket.gethostname()}-{os.getpid() if pid is None else pid}"


def install() -> None:
    """Before any metric is made: name this process's files by `process_id`."""
    if multiproc_dir() is not None:
        from prometheus_client import values

        values.ValueClass = values.MultiProcessValue(process_id)


def make_fresh(folder: Path) -> None:
    """An empty folder for a run: files of an earlier run would be summed with this one's."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def forget_process(pid: int) -> None:
    """A dead process's live gauges (its open websockets) stop counting; its counters stay."""
    if multiproc_dir() is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(process_id(pid))


def forget_dead_processes() -> None:
    """At a web master's start: the live gauges of processes that died unannounced (a killed
    master's workers) stop counting."""
    where = multiproc_dir()
    if where is None:
        return
    mine = process_id(0).removesuffix("0")  # this host's prefix: only its processes can be checked
    for path in where.glob(f"gauge_live*_{mine}*.db"):
        pid = path.stem.rsplit("-", 1)[1]
        if pid.isdigit() and not _is_alive(int(pid)):
            from prometheus_client import multiprocess  # only when there is something to forget

            multiprocess.mark_process_dead(process_id(int(pid)), str(where))


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
