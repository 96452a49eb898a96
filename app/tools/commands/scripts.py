"""Command scripts on disk: each process writes its bash scripts into a folder of its own,
`<tmp>/turnstone-commands/<pid>`, so that what a killed worker left behind can be found and
removed: by its watchdog as it stops the worker's commands, and at the next worker's start."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

ROOT_NAME = "turnstone-commands"
FOLDER_MODE = 0o700
# Scripts written before per-process folders (`<tmp>/turnstone-bash-*.sh`): removed at start
# once older than any command may run (bash's longest timeout, with room).
LEGACY_PATTERN = ("turnstone-bash-", ".sh")
LEGACY_AGE_SECONDS = 3600


def root() -> str:
    return os.path.join(tempfile.gettempdir(), ROOT_NAME)


def folder() -> str:
    """This process's folder, made on first use."""
    path = os.path.join(root(), str(os.getpid()))
    os.makedirs(root(), mode=FOLDER_MODE, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, FOLDER_MODE)
    return path


def write(text: str) -> str:
    """A new script holding `text`; its path (the caller removes it)."""
    fd, path = tempfile.mkstemp(prefix="command-", suffix=".sh", dir=folder())
    with os.fdopen(fd, "w") as file:
        file.write(text)
    return path


def sweep(now: float | None = None) -> int:
    """Remove the folders of processes that no longer run, and old scripts from before them;
    how many were removed. Run at a worker's start."""
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(root()):
            if name.isdecimal() and not _is_running(int(name)):
                shutil.rmtree(os.path.join(root(), name), ignore_errors=True)
                removed += 1
    prefix, suffix = LEGACY_PATTERN
    now = now if now is not None else _now()
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        if name.startswith(prefix) and name.endswith(suffix):
            path = os.path.join(base, name)
            with contextlib.suppress(OSError):
                if now - os.stat(path).st_mtime > LEGACY_AGE_SECONDS:
                    os.unlink(path)
                    removed += 1
    return removed


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: alive
        return True
    return True


def _now() -> float:
    import time

    return time.time()
