"""Reading /proc in tests: which processes still run, and which of them belong to a group."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def is_running(pid: int) -> bool:
    """A zombie counts as gone: it has finished, only its exit status is left."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> dict[int, str]:
    """Processes whose parent is `pid` and that still run, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[1]) == pid:
            try:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (FileNotFoundError, ProcessLookupError):
                continue
    return found


def live_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that still run."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def carrying(marker: str) -> list[int]:
    """Processes whose command line holds `marker` (a jailed command's pids are its own
    namespace's, so the host finds what it started by a marker it put in an argv)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def wait_until(predicate: Callable[[], object], seconds: float) -> bool:
    """Poll `predicate` until it holds or `seconds` pass; whether it came to hold."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
