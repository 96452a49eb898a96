"""What a call found running by a later attempt of its batch tells the model happened to it.

A call is `running` from the commit that starts it to the one that stores its result. A later
attempt that finds it so never runs it again (it may have run), and stores a result that says
what the service knows: whether the command had started (its process group is recorded once
its processes exist, `calls.note_process`), and whether the worker that ran it is gone.
"""

from __future__ import annotations

import os
import socket
from enum import StrEnum

from app.storage.models import ToolCall

RUNNER = f"{socket.gethostname()}:{os.getpid()}"  # recorded with each call this process starts

NEVER_STARTED = (
    "Interrupted before its command started: the worker that was to run it died, or a fault in "
    "the service stopped it, first. No process of the command was recorded, so it most likely "
    "never ran. It was not run again; run it again if it is still wanted."
)
STOPPED_WITH_WORKER = (
    "Interrupted: the worker running this command died before it finished, and the command's "
    "processes were killed with it (by the worker's watchdog). It may have partly run, or just "
    "finished; check its effects before running it again."
)
RESULT_LOST = (
    "Interrupted: this command ran (to its end, or until it was stopped), but a fault in the "
    "service lost its result before it was stored. Its outcome is unknown; check its effects "
    "before running it again."
)
FAULT = (
    "Interrupted: a fault in the service stopped this call before its result was stored. Its "
    "outcome is unknown (it may have run); check before running it again."
)
WORKER_UNANSWERING = (
    "Interrupted: the worker running this command stopped answering before it finished. If that "
    "worker died, the command was killed with it; if not, it may still be running. Its outcome is "
    "unknown; check its effects before running it again."
)
UNKNOWN = (
    "Interrupted: the worker running this call stopped before it finished. "
    "Its outcome is unknown (it may have partly run); check before running it again."
)


class RunnerState(StrEnum):
    """What can be told from here of the worker process that started a call."""

    THIS = "this"  # this process: it is up, so what was lost was the result, not the worker
    GONE = "gone"  # a process of this host that no longer exists
    UNKNOWN = "unknown"  # another host's, or a process of this host that still exists


def runner_state(runner: str | None) -> RunnerState:
    """`runner` ("host:pid", `RUNNER` of the process that started the call) as seen from here.
    A pid of this host that exists may have been reused by another process: only its absence
    is told for certain."""
    if runner == RUNNER:
        return RunnerState.THIS
    host, _, pid = (runner or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return RunnerState.UNKNOWN
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return RunnerState.GONE
    except (PermissionError, OverflowError):
        return RunnerState.UNKNOWN  # someone's process, or not a pid at all
    return RunnerState.UNKNOWN


def text(row: ToolCall) -> str:
    """The result an interrupted call `row` (as stored when it was found running) is given."""
    runner = runner_state(row.runner)
    if row.func_name != "bash":
        return FAULT if runner == RunnerState.THIS else UNKNOWN
    if row.process_group is None:
        return NEVER_STARTED
    return {
        RunnerState.THIS: RESULT_LOST,
        RunnerState.GONE: STOPPED_WITH_WORKER,
        RunnerState.UNKNOWN: WORKER_UNANSWERING,
    }[runner]
