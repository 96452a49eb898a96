"""A tool call's life, in one place.

    prepared -> pending -> approved -> running -> done
        |          |          |           |-> waiting -> done     (finished later, by another task)
        v          v          v           '-> interrupted         (found running after its worker died)
      error      denied    cancelled
    (and on cancel or failure: pending -> denied, approved | waiting -> cancelled, running -> interrupted;
    a call its hand-off stored running that never ran: running -> approved | cancelled)

Every transition is a conditional UPDATE on the state it leaves, so a repeated or
racing task changes nothing. Whatever ends a call, its result is stored here, its
tool message for the model is written by `answer`, and its `tool_result` event is
sent by `announce`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app.engine import interruptions
from app.engine.interruptions import RUNNER
from app.engine.outbox import Outbox, ordered
from app.events import EventType, Fence
from app.mcp.names import approval_label
from app.metrics import recording
from app.runtime import Runtime
from app.storage.database import insert_row, update_rows
from app.storage.models import (
    FINAL_CALL_STATUSES,
    CallStatus,
    Message,
    ToolCall,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    utcnow,
)
from app.tools import images
from app.tools.pipeline import PreparedCall

CANCELLED_OUTPUT = "Cancelled by user before it ran."
CANCELLED_WAITING_OUTPUT = "Cancelled by user while it was still running."
CANCEL_FEEDBACK = "Cancelled by user"

MAX_STORED_NAME = 200  # the call_id and func_name columns


def denial_text(feedback: str | None) -> str:
    return f"Denied by user: {feedback}" if feedback else "Denied by user"


# -- reading -------------------------------------------------------------------


def item(call: ToolCall) -> dict[str, Any]:
    """A call as `tool_info` / `approve_request` items and the workstream API show it."""
    return {
        "call_id": call.call_id,
        "func_name": call.func_name,
        "header": call.header,
        "preview": call.preview,
        "needs_approval": call.needs_approval,
        "error": call.error,
        "status": call.status,
    }


def batch(s: Session, turn_id: str, step: int) -> list[ToolCall]:
    return list(
        s.exec(
            select(ToolCall)
            .where(ToolCall.turn_id == turn_id, ToolCall.step == step)
            .order_by(col(ToolCall.position))
        ).all()
    )


# -- prepared: a new row ---------------------------------------------------------


def new_row(
    ws: Workstream, turn_id: str, step: int, position: int, p: PreparedCall, catalog_version: str | None
) -> ToolCall:
    """The stored form of a prepared call, already decided where no person needs to decide."""
    if p.error:
        status, how = CallStatus.ERROR, None
    elif not p.needs_approval:
        status, how = CallStatus.APPROVED, None
    elif ws.auto_approve or approval_label(p.func_name, p.args) in ws.auto_approve_tools:
        status, how = CallStatus.APPROVED, "auto"
    else:
        status, how = CallStatus.PENDING, None
    return ToolCall(
        ws_id=ws.id,
        turn_id=turn_id,
        step=step,
        position=position,
        call_id=p.call_id,
        func_name=p.func_name[:MAX_STORED_NAME],
        args=p.args,
        header=p.header,
        preview=p.preview,
        needs_approval=status == CallStatus.PENDING,
        error=p.error,
        status=status,
        decided_how=how,
        output=p.error,
        is_error=bool(p.error),
        catalog_version=catalog_version,
    )


# -- transitions -------------------------------------------------------------------


def _move(s: Session, row: ToolCall, leaving: Iterable[CallStatus], **values: Any) -> bool:
    """One conditional transition; on success `row` carries the new values, as stored. Every
    caller's session holds no object of the call but `row` (or none at all)."""
    left = or_(*(col(ToolCall.status) == status for status in leaving))
    if update_rows(s, update(ToolCall).where(col(ToolCall.id) == row.id, left).values(**values)) != 1:
        return False
    moved(s, row, values)
    return True


def moved(s: Session | None, row: ToolCall, values: dict[str, Any]) -> None:
    """`row` as a transition that set `values` stored it: they are its values as committed, and a
    call that ended is counted once `s` commits (None: the transition has committed already)."""
    for key, value in values.items():
        set_committed_value(row, key, value)
    if row.status in FINAL_CALL_STATUSES:
        recording.tool_call_ended(s, row.func_name, row.status, row.is_error)


def decide(
    s: Session,
    row: ToolCall,
    approved: bool,
    feedback: str | None,
    by: str,
    how: str,
    by_id: str | None = None,
    via: str | None = None,
) -> bool:
    """pending -> approved | denied; who decided (`by`, `by_id`) and through what (`via`) stay on it."""
    common = {
        "decided_by": by,
        "decided_how": how,
        "feedback": feedback,
        "decided_by_id": by_id,
        "decided_via": via,
    }
    if approved:
        return _move(s, row, [CallStatus.PENDING], status=CallStatus.APPROVED, **common)
    return _move(
        s,
        row,
        [CallStatus.PENDING],
        status=CallStatus.DENIED,
        output=denial_text(feedback),
        is_error=True,
        finished_at=utcnow(),
        **common,
    )


def start(s: Session, row: ToolCall, runner: str | None = None) -> bool:
    """approved -> running, committed before the call runs: a call runs at most once."""
    return _move(s, row, [CallStatus.APPROVED], status=CallStatus.RUNNING, started_at=utcnow(), runner=runner)


def note_process(rt: Runtime, row: ToolCall, group: int) -> None:
    """Record that the running call's command has started, as process group `group` (what
    an interrupted call's result rests on, `interruptions.text`); its result clears it."""
    with rt.db.session() as s:
        update_rows(
            s,
            update(ToolCall)
            .where(col(ToolCall.id) == row.id, col(ToolCall.status) == CallStatus.RUNNING)
            .values(process_group=group),
        )


@dataclass(frozen=True)
class StartedCall:
    """A batch's only call, stored already running by the transaction that handed the batch
    on to the task that runs it next (`start_as_handed_on`), and the workstream as that
    transaction left it: the batch runs the call without reading or writing first."""

    ws: Workstream
    row: ToolCall


def start_as_handed_on(row: ToolCall) -> None:
    """approved -> running for a call not yet stored, in the transaction that hands its batch
    on to this task, which runs it next: committed before it runs, as `start` is."""
    row.status, row.started_at, row.runner = CallStatus.RUNNING, utcnow(), RUNNER


def unstart(s: Session, row: ToolCall) -> bool:
    """running -> approved, for a call marked running by its hand-off whose task then sent the
    batch instead of running it (its worker began shutting down): the task that takes the
    batch runs it, rather than finding it running and calling it interrupted."""
    return _move(s, row, [CallStatus.RUNNING], status=CallStatus.APPROVED, started_at=None, runner=None)


def wait(s: Session, row: ToolCall, waiting_on: str) -> bool:
    """running -> waiting: the execute phase is over, the outcome comes later."""
    return _move(s, row, [CallStatus.RUNNING], status=CallStatus.WAITING, waiting_on=waiting_on[:200])


def finish(
    s: Session,
    row: ToolCall,
    output: str,
    is_error: bool,
    status: CallStatus = CallStatus.DONE,
    leaving: Iterable[CallStatus] = (CallStatus.RUNNING, CallStatus.WAITING),
) -> bool:
    """An unfinished call gets its result."""
    return _move(s, row, leaving, **finished(output, is_error, status))


def finished(output: str, is_error: bool, status: CallStatus = CallStatus.DONE) -> dict[str, Any]:
    """The values a call's result sets (`finish`)."""
    return {
        "status": status,
        "output": output,
        "is_error": is_error,
        "finished_at": utcnow(),
        "process_group": None,
    }


def interrupt(s: Session, row: ToolCall) -> bool:
    """running -> interrupted: found running by a later attempt of its batch (its worker died,
    or a fault ended that attempt); it is never run again, and its result says what is known."""
    return finish(s, row, interruptions.text(row), True, CallStatus.INTERRUPTED, [CallStatus.RUNNING])


def cancel_unstarted(s: Session, row: ToolCall, leaving: CallStatus = CallStatus.APPROVED) -> bool:
    """approved -> cancelled: the turn was cancelled before a thread picked the call up (or
    running -> cancelled, `leaving`, for a call its hand-off marked running that never ran)."""
    return finish(s, row, CANCELLED_OUTPUT, True, CallStatus.CANCELLED, [leaving])


def close_open(s: Session, rows: list[ToolCall], by: str, failure: str | None = None) -> list[ToolCall]:
    """End every call of a batch that has not ended, because the turn is cancelled (`failure`
    None) or has failed (`failure` says why); the calls that changed."""
    changed = []
    for row in rows:
        if row.status == CallStatus.PENDING:
            if failure is None:
                ok = decide(s, row, False, CANCEL_FEEDBACK, by, "cancel")
            else:
                ok = finish(s, row, f"Not run: {failure}", True, CallStatus.CANCELLED, [CallStatus.PENDING])
        elif row.status == CallStatus.APPROVED:
            output = CANCELLED_OUTPUT if failure is None else f"Not run: {failure}"
            ok = finish(s, row, output, True, CallStatus.CANCELLED, [CallStatus.APPROVED])
        elif row.status == CallStatus.WAITING:
            output = CANCELLED_WAITING_OUTPUT if failure is None else f"Stopped: {failure}"
            ok = finish(s, row, output, True, CallStatus.CANCELLED, [CallStatus.WAITING])
        elif row.status == CallStatus.RUNNING:
            ok = interrupt(s, row)
        else:
            continue
        if ok:
            changed.append(row)
    return changed


# -- results for the model and for clients ---------------------------------------------


def answer(
    s: Session, turn: Turn, step: int, rows: list[ToolCall] | None = None, answered: set[str] | None = None
) -> None:
    """A tool message for every ended call of the batch that has none yet, in the model's
    order: a conversation whose assistant message asks for calls must answer each one,
    or every later request for it is refused by the provider. `rows`: the batch, when the
    caller's transaction has it already; `answered`: the call ids that have their message,
    when the caller knows (else they are read)."""
    rows = batch(s, turn.id, step) if rows is None else rows
    if answered is None:
        stored = s.exec(
            select(Message.tool_call_id).where(
                Message.turn_id == turn.id,
                Message.role == "tool",
                col(Message.tool_call_id).in_([r.call_id for r in rows]),
            )
        ).all()
        answered = {call_id for call_id in stored if call_id is not None}
    for row in rows:
        if row.status not in FINAL_CALL_STATUSES or row.call_id in answered:
            continue
        insert_row(
            s,
            Message,
            ws_id=turn.ws_id,
            turn_id=turn.id,
            role="tool",
            tool_call_id=row.call_id,
            name=row.func_name,
            content=row.output or "",
            is_error=row.is_error,
        )


def announce(rt: Runtime, row: ToolCall, fence: Fence | None = None, out: Outbox | None = None) -> None:
    """The call's `tool_result`: now, or with the transition `out` collects."""
    fields = {
        "call_id": row.call_id,
        "name": row.func_name,
        "output": images.summary(row.output or ""),  # clients get a line; the model gets the image
        "is_error": row.is_error,
    }
    if out is not None:
        out.add(EventType.TOOL_RESULT, turn_id=row.turn_id, fence=fence, **fields)
    else:
        rt.events.publish(row.ws_id, EventType.TOOL_RESULT, turn_id=row.turn_id, fence=fence, **fields)


# -- calls that finish later -------------------------------------------------------------


def finish_waiting(
    rt: Runtime,
    turn_id: str,
    call_id: str,
    output: str,
    is_error: bool = False,
    status: CallStatus = CallStatus.DONE,
) -> bool:
    """Whatever a waiting call waited for has ended: store its result, and when it was the
    batch's last waiting call, hand the batch back to a worker. False when the call was not
    waiting (finished already, or cancelled): a repeat changes nothing.

    A call still `running` is finished too: what it started (a sub-agent) may end before
    its batch has recorded the wait; the batch then finds it done and goes on."""
    with rt.db.session() as s:
        known = s.get(Turn, turn_id)
    if known is None:
        return False
    with ordered(rt, known.ws_id) as out, rt.db.session() as s:
        # The turn first, as every other writer locks it: one order, no deadlock.
        turn = s.get(Turn, turn_id, with_for_update=True)
        if turn is None or turn.status != TurnStatus.ACTIVE:
            return False
        row = s.exec(
            select(ToolCall).where(
                ToolCall.turn_id == turn_id,
                ToolCall.call_id == call_id,
                col(ToolCall.status).in_([CallStatus.WAITING, CallStatus.RUNNING]),
            )
        ).first()
        if row is None or not finish(s, row, output, is_error, status, [CallStatus(row.status)]):
            return False
        announce(rt, row, out=out)
        resumed = not has_waiting(s, turn_id, row.step) and resume(rt, s, turn_id)
        step = row.step
    if resumed:
        rt.queue.tool_batch(turn_id, step)
    return True


def has_waiting(s: Session, turn_id: str, step: int) -> bool:
    return any_waiting(batch(s, turn_id, step))


def any_waiting(rows: list[ToolCall]) -> bool:
    return any(r.status == CallStatus.WAITING for r in rows)


def resume(rt: Runtime, s: Session, turn_id: str) -> bool:
    """awaiting -> tools: exactly one finisher hands the batch on."""
    now = rt.db.now()
    moved = s.exec(
        update(Turn)
        .where(col(Turn.id) == turn_id, col(Turn.phase) == TurnPhase.AWAITING)
        .values(
            phase=TurnPhase.TOOLS,
            heartbeat_at=None,
            enqueued_at=now,
            phase_started_at=now,
            step_claims=0,
            step_failures=0,
        )
    )
    return bool(moved.rowcount == 1)
