"""A watchdog that stops a command's process group when the worker that started it dies.

The worker may be SIGKILLed, so nothing can run in it then; and a Celery worker runs
tasks on threads, where PR_SET_PDEATHSIG fires when a *thread* exits and reaches only
the direct child. So a separate small process waits on a pipe that only the worker can
write: end of file without a word from the worker means the worker is gone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from types import TracebackType

GUARD_SHELL = "/bin/sh"
DEFAULT_GRACE_SECONDS = 0.5  # between SIGTERM and SIGKILL of an orphaned group

# Line 1 is the group to guard; any later line means the worker stopped the group
# itself. End of file before that line: the worker died, so stop the group.
# `read` takes a pipe one byte at a time, so line 2 is still there for the second read.
_WATCHDOG = """
IFS= read -r pgid || exit 0
case $pgid in ''|*[!0-9]*) exit 0 ;; esac
IFS= read -r word && exit 0
kill -s TERM -- "-$pgid" 2>/dev/null || exit 0
sleep "$1"
kill -s KILL -- "-$pgid" 2>/dev/null
exit 0
"""

_RELEASE = b"released\n"


class GroupGuard:
    """Start the watchdog before the command, `watch` the command's group, then leave the block.

    Leaving the block releases the watchdog: the caller has stopped the group
    itself by then, and must release before it reaps the group leader, so that
    the watchdog never signals a group id the kernel could have given to
    someone else.
    """

    def __init__(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        read_end, self._write_end = os.pipe()  # not inheritable: no other child holds the write end
        try:
            self._proc = subprocess.Popen(
                [GUARD_SHELL, "-c", _WATCHDOG, "turnstone-process-guard", str(grace)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": os.defpath},  # it needs `sleep`, and none of the worker's secrets
                start_new_session=True,  # outside the guarded group, and out of reach of the worker's
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def watch(self, pgid: int) -> None:
        os.write(self._write_end, f"{pgid}\n".encode())

    def release(self) -> None:
        """Tell the watchdog to leave the group alone, and wait for it to exit."""
        if self._write_end < 0:
            return
        with contextlib.suppress(BrokenPipeError):  # the watchdog is gone already
            os.write(self._write_end, _RELEASE)
        os.close(self._write_end)
        self._write_end = -1
        self._proc.wait()

    def __enter__(self) -> GroupGuard:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
