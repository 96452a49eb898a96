"""A watchdog that stops the command process groups of a worker that dies.

The worker may be SIGKILLed, so nothing can run in it then; and a Celery worker runs
tasks on threads, where PR_SET_PDEATHSIG fires when a *thread* exits and reaches only
the direct child. So a separate small process waits on a pipe that only the worker can
write: end of file means the worker is gone, and the watchdog stops every group it was
told of and not told to forget, and removes the worker's command scripts. One watchdog
serves all of a process's commands (started with the first, and again should it die), so
a command costs two lines on a pipe, not a process of its own.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from types import TracebackType

GUARD_SHELL = "/bin/sh"
DEFAULT_GRACE_SECONDS = 0.5  # between SIGTERM and SIGKILL of an orphaned group

# Each line is `+PGID` (guard the group) or `-PGID` (forget it: the worker stopped it
# itself). End of file: the worker died, so stop the groups still guarded. A removal is
# always read before the end of file that follows it, so a group the worker forgot and then
# reaped (its id free for reuse) is never signalled.
_WATCHDOG = """
groups=" "
while IFS= read -r line; do
  pgid=${line#?}
  case $pgid in ''|*[!0-9]*) continue ;; esac
  case $line in
    +*) groups="$groups$pgid " ;;
    -*) case $groups in *" $pgid "*) groups="${groups%% $pgid *} ${groups#* $pgid }" ;; esac ;;
  esac
done
[ -z "$2" ] || rm -rf -- "$2"  # the worker's command scripts: nothing will read them again
alive=""
for g in $groups; do kill -s TERM -- "-$g" 2>/dev/null && alive="$alive $g"; done
[ -n "$alive" ] || exit 0
sleep "$1"
for g in $alive; do kill -s KILL -- "-$g" 2>/dev/null; done
exit 0
"""


class Watchdog:
    """This process's watchdog for one grace period: `add` a group, `discard` it when done."""

    _registry_lock = threading.Lock()
    _running: dict[tuple[int, float], Watchdog] = {}

    @classmethod
    def for_process(cls, grace: float, leftovers: str | None = None) -> Watchdog:
        """The running watchdog of this process (a forked child gets its own), started if
        need be: raises if it cannot start, before anything it should guard exists.
        `leftovers`: a folder of this process's that the watchdog removes when the process dies."""
        with cls._registry_lock:
            found = cls._running.get((os.getpid(), grace))
            if found is None:
                found = cls._running[(os.getpid(), grace)] = cls(grace, leftovers)
        found.ensure_running()
        return found

    def __init__(self, grace: float, leftovers: str | None = None) -> None:
        self.grace = grace
        self.leftovers = leftovers
        self._lock = threading.Lock()  # one writer on the pipe; the groups and the process with it
        self._groups: set[int] = set()
        self._proc: subprocess.Popen[bytes] | None = None
        self._write_end = -1

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def ensure_running(self) -> None:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._restart()

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}\n")

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)
            with contextlib.suppress(BrokenPipeError):  # a dead watchdog guards nothing anyway
                os.write(self._write_end, f"-{pgid}\n".encode())

    def _send(self, line: str) -> None:
        try:
            os.write(self._write_end, line.encode())  # a short line: one atomic write
        except BrokenPipeError:  # it was killed: a new one takes over every group still here
            self._restart()

    def _restart(self) -> None:
        if self._write_end >= 0:
            os.close(self._write_end)
            self._write_end = -1
        if self._proc is not None:
            self._proc.wait()
        read_end, write_end = os.pipe()  # not inheritable: no other child holds the write end
        try:
            self._proc = subprocess.Popen(
                [
                    GUARD_SHELL,
                    "-c",
                    _WATCHDOG,
                    "turnstone-process-guard",
                    str(self.grace),
                    self.leftovers or "",
                ],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": os.defpath},  # it needs `sleep`, and none of the worker's secrets
                start_new_session=True,  # outside the guarded groups, out of reach of the worker's
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._write_end = write_end
        if self._groups:
            os.write(write_end, "".join(f"+{pgid}\n" for pgid in sorted(self._groups)).encode())


class GroupGuard:
    """Enter before starting the command, `watch` its group, then leave the block.

    Entering makes sure the process's watchdog runs (so that a watchdog that cannot start
    leaves nothing running); leaving tells it to forget the group. The caller has stopped
    the group itself by then, and must leave before it reaps the group leader, so that the
    watchdog never signals a group id the kernel could have given to someone else.
    """

    def __init__(self, grace: float = DEFAULT_GRACE_SECONDS, leftovers: str | None = None) -> None:
        self._watchdog = Watchdog.for_process(grace, leftovers)
        self._pgid: int | None = None

    @property
    def pid(self) -> int:
        """The watchdog's process id."""
        return self._watchdog.pid

    def watch(self, pgid: int) -> None:
        self._watchdog.add(pgid)
        self._pgid = pgid

    def release(self) -> None:
        """Tell the watchdog to leave the group alone."""
        if self._pgid is not None:
            self._watchdog.discard(self._pgid)
            self._pgid = None

    def __enter__(self) -> GroupGuard:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
