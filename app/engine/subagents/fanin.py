"""The fan-in of sub-agents: a child's end becomes its parent's `task_agent` result.

When a child's turn ends, the answer is recorded on the child's row in the same
transaction (`record_end`, called by `turns.end_turn`), so an ended child always has one.
Once that commits, the answer is handed to the parent's waiting call (`deliver`: a
conditional transition, so a repeat changes nothing), and the children of an ended turn
are stopped. Beat's sweeper (`sweep`) redoes either when a crash came in between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from sqlalchemy import exc as sa_exc
from sqlalchemy import update
from sqlmodel import Session, col, select

from app.engine.life import calls
from app.engine.publishing.outbox import Outbox
from app.runtime import Runtime
from app.storage.models import (
    FINAL_CALL_STATUSES,
    CallStatus,
    Message,
    ToolCall,
    Turn,
    TurnStatus,
    Workstream,
)
from app.tools.core.tool import TASK
from app.tools.core.truncation import truncate

log = logging.getLogger(__name__)

NO_ANSWER = "(the sub-agent ended without a final answer)"
CANCELLED_ANSWER = "Cancelled: the sub-agent was stopped before it finished."
# What reaches the parent's model, and the two parts of the call that say why.
FAILED_ANSWER = "Error: the sub-agent failed: {error}"

# What a delivery or a stop may meet that the sweeper's next pass gets past.
PASSING_FAULTS = (sa_exc.OperationalError, sa_exc.InterfaceError, redis.RedisError)


def record_end(s: Session, out: Outbox, turn_id: str, ws_id: str, status: str, error: str | None) -> None:
    """Inside the transaction that ends a sub-agent's turn `turn_id`: its answer is recorded on
    its workstream, and handed to its parent's waiting call once the end is committed."""
    output, is_error = _answer(s, turn_id, status, error)
    s.exec(
        update(Workstream)
        .where(col(Workstream.id) == ws_id, col(Workstream.task_output).is_(None))
        .values(task_output=output, task_is_error=is_error)
    )
    out.after(lambda rt: _quietly(rt, "delivering the answer of sub-agent", ws_id, deliver))


def stop_children_after(out: Outbox, turn_id: str) -> None:
    """Once the end of turn `turn_id` is committed, its sub-agents still running are stopped:
    by a task (`app.engine.life.cancel.stop_children`), since a cancel ends turns itself."""
    out.after(
        lambda rt: _quietly(
            rt, "stopping the sub-agents of turn", turn_id, lambda rt, turn: rt.queue.stop_children(turn)
        )
    )


def _answer(s: Session, turn_id: str, status: str, error: str | None) -> tuple[str, bool]:
    if status == TurnStatus.ERROR:
        return FAILED_ANSWER.format(error=error or "unknown error"), True
    last = s.exec(
        select(Message.content)
        .where(Message.turn_id == turn_id, Message.role == "assistant")
        .order_by(col(Message.id).desc())
        .limit(1)
    ).first()
    if status == TurnStatus.CANCELLED:
        said = f"\n\nIts last words:\n{last}" if last else ""
        return CANCELLED_ANSWER + said, True
    return (last or NO_ANSWER), False


def deliver(rt: Runtime, child_ws_id: str) -> bool:
    """Finish the parent's call with the child's recorded answer; False when there is none
    yet or the call is not waiting (finished already, or cancelled)."""
    with rt.db.reader() as s:
        child = s.get(Workstream, child_ws_id)
        ended = s.exec(
            select(Turn.status).where(Turn.ws_id == child_ws_id).order_by(col(Turn.created_at).desc())
        ).first()
    if child is None or child.task_output is None or child.parent_turn_id is None:
        return False
    assert child.parent_call_id is not None
    cancelled = ended == TurnStatus.CANCELLED
    return calls.finish_waiting(
        rt,
        child.parent_turn_id,
        child.parent_call_id,
        truncate(child.task_output, rt.settings.tools.truncation),
        child.task_is_error,
        CallStatus.CANCELLED if cancelled else CallStatus.DONE,
    )


def sweep(rt: Runtime, stop: Callable[[Runtime, str], bool]) -> int:
    """Redo a fan-in a crash left half done: an ended child whose parent call still waits
    gets its answer delivered; a working child whose parent call or turn has ended is
    stopped (`stop`: cancel it; whether it was still working). The number of children seen to."""
    with rt.db.reader() as s:
        rows = s.exec(
            select(Workstream, ToolCall, Turn)
            .join(ToolCall, col(ToolCall.id) == col(Workstream.parent_call_row))
            .join(Turn, col(Turn.id) == col(ToolCall.turn_id))
            .where(
                Workstream.kind == TASK,
                (
                    col(Workstream.task_output).is_not(None)
                    & col(ToolCall.status).in_([CallStatus.WAITING, CallStatus.RUNNING])
                )
                | (
                    col(Workstream.active_turn_id).is_not(None)
                    & (col(ToolCall.status).in_(FINAL_CALL_STATUSES) | (Turn.status != TurnStatus.ACTIVE))
                ),
            )
        ).all()
    done = 0
    for child, _call, _turn in rows:
        if child.task_output is not None:
            if deliver(rt, child.id):
                log.warning("sub-agent %s: its answer had not reached its parent; delivered", child.id)
                done += 1
            continue
        if stop(rt, child.id):
            log.warning("sub-agent %s: its parent's call has ended; stopping it", child.id)
            done += 1
    return done


def _quietly(rt: Runtime, what: str, ident: str, action: Callable[[Runtime, str], object]) -> None:
    """After the commit, a passing fault must not fail the task that ended the turn: the
    state is stored and the sweeper finishes the work."""
    try:
        action(rt, ident)
    except PASSING_FAULTS as exc:
        log.warning("%s %s: %s; the sweeper will see to it", what, ident, type(exc).__name__)
