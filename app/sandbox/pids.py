"""A process cap for jails started by root: a pids cgroup per command.

RLIMIT_NPROC (the jail's `processes`) binds every user but root: the kernel lets processes whose
real uid is root on the host fork past it, and a user namespace does not change that uid. So a
service that runs as root puts each jailed command in a cgroup of its own whose pids.max is the
same number, when the host has a writable pids controller (cgroup v1's `pids` hierarchy).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading

PIDS_HIERARCHY = "/sys/fs/cgroup/pids"  # cgroup v1
GROUP_PREFIX = "turnstone-jail"
# Moves the shell into the cgroup, then becomes the jail: everything the command forks is inside.
ENTER = 'echo $$ > "$1" && shift && exec "$@"'
ENTER_SHELL = "/bin/sh"

_counter = itertools.count()
_leftovers: list[str] = []  # cgroups whose last processes were still exiting when the call ended
_lock = threading.Lock()
_swept_dead = False  # the groups of processes that died before they could remove theirs


def is_needed() -> bool:
    """Whether RLIMIT_NPROC would not bind this process's commands."""
    return os.geteuid() == 0


def own_group() -> str:
    """This process's pids cgroup, as a folder: a command's group goes inside it, so that any
    limit set on the service's own group (a container's, say) still holds for its commands."""
    try:
        with open("/proc/self/cgroup") as file:
            for line in file:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "pids" in controllers.split(","):
                    return os.path.normpath(os.path.join(PIDS_HIERARCHY, path.lstrip("/")))
    except OSError:
        pass
    return PIDS_HIERARCHY


def is_available() -> bool:
    return os.access(os.path.join(own_group(), "cgroup.procs"), os.W_OK)


class ProcessCap:
    """A cgroup holding at most `limit` processes, for one command: `prefix` goes before its argv;
    `remove` after the command's processes are gone."""

    def __init__(self, limit: int) -> None:
        _sweep()
        self.path = os.path.join(own_group(), f"{GROUP_PREFIX}-{os.getpid()}-{next(_counter)}")
        os.mkdir(self.path)
        try:
            with open(os.path.join(self.path, "pids.max"), "w") as file:
                file.write(str(limit))
        except OSError:
            os.rmdir(self.path)
            raise

    def prefix(self) -> list[str]:
        return [ENTER_SHELL, "-c", ENTER, "turnstone-jail", os.path.join(self.path, "cgroup.procs")]

    def remove(self) -> None:
        try:
            os.rmdir(self.path)
        except OSError:  # killed processes still leaving: removed by a later command
            with _lock:
                _leftovers.append(self.path)


def _sweep() -> None:
    global _swept_dead
    with _lock:
        pending = list(_leftovers)
        _leftovers.clear()
        if not _swept_dead:
            _swept_dead = True
            pending += _orphans()
    for path in pending:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:
            with _lock:
                _leftovers.append(path)


def _orphans() -> list[str]:
    """Groups named after a process that no longer runs (a worker killed mid-command)."""
    found = []
    parent = own_group()
    for name in os.listdir(parent):
        owner = name.removeprefix(f"{GROUP_PREFIX}-").partition("-")[0]
        if name.startswith(GROUP_PREFIX) and owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            found.append(os.path.join(parent, name))
    return found


def cap(limit: int) -> ProcessCap | None:
    """The cap for one command where root needs one and the host has the controller, else None."""
    if not (is_needed() and is_available()):
        return None
    with contextlib.suppress(OSError):
        return ProcessCap(limit)
    return None
