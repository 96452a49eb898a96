"""What the engine and the web tier call to count: a turn's start and end and a tool call's end
count once their transaction commits (a rolled-back or superseded attempt counts nothing); a
phase's time is observed as the worker spends it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import event
from sqlalchemy.orm import Session

from app.metrics.definitions import (
    MODEL_STEP_SECONDS,
    OPEN_WEBSOCKETS,
    TOOL_BATCH_SECONDS,
    TOOL_CALLS,
    TURNS_FINISHED,
    TURNS_STARTED,
)

# Distinct tool labels one process hands out; later names count as OTHER_TOOL. Tool names come
# from the registry and configured sources (MCP servers), bounded but possibly many.
MAX_TOOL_LABELS = 200
OTHER_TOOL = "other"
UNKNOWN_TOOL = "unknown"  # a name the model made up: the call was refused before it ran

_PENDING = "turnstone_metrics_pending"
_tool_labels: set[str] = set()
_tool_labels_lock = threading.Lock()


# -- counted when the transaction commits ------------------------------------------------------


def on_commit(s: Session | None, count: Callable[[], None]) -> None:
    """Run `count` once `s` commits; never if it rolls back. None: what it counts was written
    by a statement that has committed already (`Database.one_statement`), so it runs now."""
    if s is None:
        count()
        return
    pending = s.info.get(_PENDING)
    if pending is None:
        pending = s.info[_PENDING] = []
        event.listen(s, "after_commit", _flush)
        event.listen(s, "after_rollback", _drop)
    pending.append(count)


def _flush(s: Session) -> None:
    for count in s.info.pop(_PENDING, []):
        count()
    s.info[_PENDING] = []


def _drop(s: Session) -> None:
    s.info[_PENDING] = []


def turn_started(s: Session | None) -> None:
    on_commit(s, TURNS_STARTED.inc)


def turn_finished(s: Session | None, outcome: str) -> None:
    on_commit(s, TURNS_FINISHED.labels(outcome=str(outcome)).inc)


def tool_call_ended(s: Session | None, tool: str, status: str, is_error: bool) -> None:
    outcome = call_outcome(status, is_error)
    on_commit(s, TOOL_CALLS.labels(tool=tool_label(tool), outcome=outcome).inc)


def call_outcome(status: str, is_error: bool) -> str:
    """A final call status as the metric's outcome: `done` splits into ok and error; a call
    its prepare phase refused (`error` status) is `refused`."""
    if status == "done":
        return "error" if is_error else "ok"
    return "refused" if status == "error" else str(status)


def tool_label(name: str) -> str:
    with _tool_labels_lock:
        if name in _tool_labels:
            return name
        if len(_tool_labels) >= MAX_TOOL_LABELS:
            return OTHER_TOOL
        _tool_labels.add(name)
        return name


# -- observed as it happens --------------------------------------------------------------------


@contextmanager
def phase_timer(phase: str) -> Iterator[None]:
    """Observe a model step's or tool batch's time, however it ends."""
    histogram = MODEL_STEP_SECONDS if phase == "model" else TOOL_BATCH_SECONDS if phase == "tools" else None
    start = time.perf_counter()
    try:
        yield
    finally:
        if histogram is not None:
            histogram.observe(time.perf_counter() - start)


def websocket_opened() -> None:
    OPEN_WEBSOCKETS.inc()


def websocket_closed() -> None:
    OPEN_WEBSOCKETS.dec()
