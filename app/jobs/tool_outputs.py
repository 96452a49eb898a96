"""A client tool's calls (app/tools/client_tools.py) as they wait for the client: which wait, the
outputs a client submits for them (each finishes its call through `calls.finish_waiting`, the
last one hands the batch back to a worker, as a sub-agent's end does), and the wait's time-out,
kept by beat's sweep. Everything is read from the stored calls, so a wait outlives any restart."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from app.engine.life import calls
from app.errors import ConflictError, UnprocessableError
from app.runtime import Runtime
from app.storage.models import CallStatus, ToolCall, Turn, TurnStatus
from app.tools.client_tools import WAITING_ON, is_client_call
from app.tools.core.truncation import truncate

log = logging.getLogger(__name__)

_OPEN = (CallStatus.RUNNING, CallStatus.WAITING)  # running: its wait is being recorded
TIMED_OUT = (
    "Error: the client did not submit this tool's output within {limit} s; the call timed out "
    "and nothing was done for it."
)


@dataclass(frozen=True)
class Output:
    call_id: str
    output: str
    is_error: bool = False


def waiting_rows(s: Session, turn: Turn | None) -> list[ToolCall]:
    """The client tool calls of the turn's current step still waiting for an output."""
    if turn is None or turn.status != TurnStatus.ACTIVE:
        return []
    rows = calls.batch(s, turn.id, turn.step)
    return [r for r in rows if r.status in _OPEN and is_client_call(r.catalog_version)]


def shown(rows: list[ToolCall]) -> list[dict[str, Any]]:
    """The waiting calls as a run's `required_action` lists them."""
    return [{"call_id": r.call_id, "name": r.func_name, "arguments": r.args} for r in rows]


def submit(rt: Runtime, turn_id: str | None, outputs: list[Output]) -> list[str]:
    """Each output finishes its waiting call; the call ids finished. Every waiting call's output
    comes in one request (the model goes on once all have one): an output for a call that is
    not waiting is a ConflictError naming those that are; a missing one an UnprocessableError;
    a call named twice an UnprocessableError too."""
    ids = [o.call_id for o in outputs]
    if len(set(ids)) != len(ids):
        raise UnprocessableError("tool_outputs: a call_id is given twice", field="tool_outputs")
    with rt.db.reader() as s:
        turn = s.get(Turn, turn_id) if turn_id else None
        waiting = {r.call_id for r in waiting_rows(s, turn)}
    if not waiting:
        raise ConflictError("no client tool call is waiting for an output", waiting=[])
    unknown = [i for i in ids if i not in waiting]
    if unknown:
        raise ConflictError(
            f"tool_outputs: not waiting for an output: {', '.join(sorted(unknown))[:400]}",
            field="tool_outputs",
            waiting=sorted(waiting),
        )
    missing = sorted(waiting - set(ids))
    if missing:
        message = f"tool_outputs: every waiting call's output at once; missing: {', '.join(missing)[:400]}"
        raise UnprocessableError(message, field="tool_outputs", waiting=sorted(waiting))
    assert turn is not None
    limit = rt.settings.tools.truncation
    return [
        o.call_id
        for o in outputs
        if calls.finish_waiting(rt, turn.id, o.call_id, truncate(o.output, limit), o.is_error)
    ]


def expire(rt: Runtime) -> int:
    """Beat's part: a client tool call waiting longer than the configured limit gets an error
    result the model sees, and the turn goes on. The number timed out."""
    limit = rt.settings.client_tool_timeout_seconds
    cutoff = rt.db.ago(limit)
    with rt.db.reader() as s:
        rows = s.exec(
            select(ToolCall.turn_id, ToolCall.call_id).where(
                col(ToolCall.status) == CallStatus.WAITING,
                col(ToolCall.waiting_on) == WAITING_ON,
                col(ToolCall.started_at) < cutoff,
            )
        ).all()
    done = 0
    for turn_id, call_id in rows:
        if calls.finish_waiting(rt, turn_id, call_id, TIMED_OUT.format(limit=limit), is_error=True):
            log.info("turn %s: client tool call %s timed out after %s s", turn_id, call_id, limit)
            done += 1
    return done
