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
    MODEL_COST,
    MODEL_STEP_SECONDS,
    MODEL_TOKENS,
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
_user_labels: set[str] = set()
_labels_lock = threading.Lock()
MAX_USER_LABELS = 500  # distinct users one process labels; past it: `other`


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


# A step's usage keys, as the metric's `kind` (OpenAI's cached input is inside input_tokens).
_TOKEN_KINDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}


def model_usage(model: str, user: str, usage: dict[str, object] | None, cost: float) -> None:
    """One stored step's tokens and cost. `model` is a configured name (bounded by the config);
    users past MAX_USER_LABELS in one process count as `other`."""
    who = _bounded(_user_labels, user, MAX_USER_LABELS)
    for key, kind in _TOKEN_KINDS.items():
        count = (usage or {}).get(key)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            MODEL_TOKENS.labels(model=model, user=who, kind=kind).inc(count)
    if cost > 0:
        MODEL_COST.labels(model=model, user=who).inc(cost)


def call_outcome(status: str, is_error: bool) -> str:
    """A final call status as the metric's outcome: `done` splits into ok and error; a call
    its prepare phase refused (`error` status) is `refused`."""
    if status == "done":
        return "error" if is_error else "ok"
    return "refused" if status == "error" else str(status)


def tool_label(name: str) -> str:
    return _bounded(_tool_labels, name, MAX_TOOL_LABELS)


def _bounded(seen: set[str], name: str, most: int) -> str:
    with _labels_lock:
        if name in seen:
            return name
        if len(seen) >= most:
            return OTHER_TOOL
        seen.add(name)
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
