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

import sqlalchemy
from sqlalchemy import (
    DateTime,
    Insert,
    Update,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal,
    null,
    or_,
    update,
)
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from app.engine.life import interruptions
from app.engine.life.interruptions import RUNNER
from app.engine.publishing.outbox import Outbox, ordered
from app.events import EventType, Fence
from app.judge import heuristic
from app.metrics import recording
from app.policies import rules
from app.runtime import Runtime
from app.storage.database import typed, update_rows
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
from app.tools.core.pipeline import PreparedCall
from app.tools.core.tool import approval_label
from app.tools.files import images

CANCELLED_OUTPUT = "Cancelled by user before it ran."
CANCELLED_WAITING_OUTPUT = "Cancelled by user while it was still running."
CANCEL_FEEDBACK = "Cancelled by user"

MAX_STORED_NAME = 200  # the call_id and func_name columns
# decided_how and decided_by of a call the intent judge approved (a workstream's smart_approve)
SMART, JUDGE = "smart", "judge"


def denial_text(feedback: str | None) -> str:
    return f"Denied by user: {feedback}" if feedback else "Denied by user"


# -- reading -------------------------------------------------------------------


def item(call: ToolCall) -> dict[str, Any]:
    """A call as `tool_info` / `approve_request` items and the workstream API show it; a call
    waiting for a person carries its arguments, which that person may edit (edits.py)."""
    shown = {
        "call_id": call.call_id,
        "func_name": call.func_name,
        "header": call.header,
        "preview": call.preview,
        "needs_approval": call.needs_approval,
        "error": call.error,
        "status": call.status,
        "rule": call.policy_rule,  # the admin's policy rule that decided or asked for it
        "verdict": call.verdict,  # the intent judge's, when it needed a person (app/judge)
    }
    if call.status == CallStatus.PENDING:
        shown["args"] = call.args
    return shown


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
    ws: Workstream,
    turn_id: str,
    step: int,
    position: int,
    p: PreparedCall,
    catalog_version: str | None,
    policy: rules.Book = rules.EMPTY,
) -> ToolCall:
    """The stored form of a prepared call, already decided where no person needs to decide.
    The admin's `policy` comes first: a rule's deny, ask or allow stands over the tool's own
    need, "always" and the workstream's auto-approve (the one place those are decided). A call
    left for a person gets the intent judge's verdict; with the workstream's `smart_approve`, a
    low-risk one is approved on it, unless an admin's rule asked for a person."""
    rule = policy.rule_for(p.func_name, p.args) if not p.error else None
    output, by, verdict = p.error, None, None
    if p.error:
        status, how = CallStatus.ERROR, None
    elif rule is not None and rule.effect != rules.Effect.ASK:
        denied = rule.effect == rules.Effect.DENY
        status = CallStatus.DENIED if denied else CallStatus.APPROVED
        how, by = rules.RULE_HOW, rules.DECIDED_BY
        output = rules.denial_text(rule) if denied else None
    elif rule is not None:
        status, how = CallStatus.PENDING, None
        verdict = heuristic.judge(p.func_name, p.args)
    elif not p.needs_approval:
        status, how = CallStatus.APPROVED, None
    elif ws.auto_approve or approval_label(p.func_name, p.args) in ws.auto_approve_tools:
        status, how = CallStatus.APPROVED, "auto"
    else:
        status, how = CallStatus.PENDING, None
        verdict = heuristic.judge(p.func_name, p.args)
        if ws.smart_approve and verdict.risk == heuristic.LOW:
            status, how, by = CallStatus.APPROVED, SMART, JUDGE
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
        decided_by=by,
        output=output,
        is_error=output is not None,
        finished_at=utcnow() if status == CallStatus.DENIED else None,
        catalog_version=catalog_version,
        policy_rule=rule.record() if rule is not None else None,
        verdict=verdict.record() if verdict is not None else None,
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
    arguments: dict[str, Any] | None = None,
) -> bool:
    """pending -> approved | denied; who decided (`by`, `by_id`) and through what (`via`) stay on it.
    Approved with `arguments` (a person's edit, checked: edits.py), it runs with those; the
    model's stay beside them."""
    common = {
        "decided_by": by,
        "decided_how": how,
        "feedback": feedback,
        "decided_by_id": by_id,
        "decided_via": via,
    }
    if approved:
        edit = {"args": arguments, "original_args": row.args} if arguments is not None else {}
        return _move(s, row, [CallStatus.PENDING], status=CallStatus.APPROVED, **common, **edit)
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


def answer(s: Session, turn: Turn, step: int) -> None:
    """A tool message for every ended call of the batch that has none yet, in the model's
    order: a conversation whose assistant message asks for calls must answer each one,
    or every later request for it is refused by the provider."""
    s.flush()
    s.connection().execute(
        answering(bindparam("answer_turn"), bindparam("answer_step"), None, None),
        {"answer_turn": turn.id, "answer_step": step, "now": utcnow()},
    )


def answering(turn_id: Any, step: Any, finished_row: Any, feedback: Any, after: Any = None) -> Insert:
    """`answer` as a statement, for a transition's steps (`app.engine.life.transition`): the batch of
    `step` of turn `turn_id` (either may be the row of an earlier step); `finished_row`, the
    call that step finished with the parameters `call_output` and `call_is_error` (on
    PostgreSQL the statement's other steps read the call as it was before it ran), and the
    turn's `feedback`, a user message after the results; only `after` an earlier step's row,
    when given. The parameter `now` is their time."""
    c = ToolCall.__table__  # type: ignore[attr-defined]
    content: Any = func.coalesce(c.c.output, "")
    is_error: Any = c.c.is_error
    ended: Any = c.c.status.in_(sorted(FINAL_CALL_STATUSES))
    if finished_row is not None:
        just = c.c.id == finished_row
        content = case((just, typed(ToolCall, "output", "call_output")), else_=content)
        is_error = case((just, typed(ToolCall, "is_error", "call_is_error")), else_=is_error)
        ended = or_(ended, just)
    answered = exists().where(
        col(Message.turn_id) == c.c.turn_id,
        col(Message.role) == "tool",
        col(Message.tool_call_id) == c.c.call_id,
    )
    tool = sqlalchemy.select(
        c.c.ws_id,
        c.c.turn_id,
        literal("tool").label("role"),
        c.c.call_id.label("tool_call_id"),
        c.c.func_name.label("name"),
        content.label("content"),
        is_error.label("is_error"),
        c.c.position.label("position"),
    ).where(c.c.turn_id == turn_id, c.c.step == step, ended, ~answered)
    gate = [after.is_not(None)] if after is not None else []
    tool = tool.where(*gate)
    if feedback is not None:  # after every result, whatever their positions
        said = sqlalchemy.select(
            _SAID_BY_TURN.c.ws_id,
            _SAID_BY_TURN.c.id,
            literal("user"),
            null(),
            null(),
            feedback,
            sqlalchemy.false(),
            literal(2**31 - 1),
        ).where(_SAID_BY_TURN.c.id == turn_id, feedback.is_not(None), *gate)
        tool = sqlalchemy.union_all(tool, said)  # type: ignore[assignment]
    rows = tool.subquery("answers")
    names = ["ws_id", "turn_id", "role", "tool_call_id", "name", "content", "is_error"]
    ordered_rows = sqlalchemy.select(
        *(rows.c[n] for n in names), bindparam("now", type_=DateTime())
    ).order_by(rows.c.position)
    stored = insert(Message).from_select([*names, "created_at"], ordered_rows, include_defaults=False)
    return stored.returning(col(Message.id))


_SAID_BY_TURN = Turn.__table__  # type: ignore[attr-defined]


def finishing(turn_id: Any) -> Update:
    """`finish` of the running call `call_row` of turn `turn_id`, as a transition's step: its
    result the parameters `call_<column>` of `finished` give."""
    values = {column: typed(ToolCall, column, f"call_{column}") for column in finished("", False)}
    return (
        update(ToolCall)
        .where(
            col(ToolCall.id) == bindparam("call_row"),
            col(ToolCall.turn_id) == turn_id,
            col(ToolCall.status) == CallStatus.RUNNING,
        )
        .values(**values)
        .returning(col(ToolCall.id))
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
    return any(r.status == CallStatus.WAITING for r in batch(s, turn_id, step))


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
