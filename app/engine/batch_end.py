"""The end of a batch of one call, in one statement (PostgreSQL).

A batch whose only call its model step started (`calls.StartedCall`: a bash command the
workstream auto-approves, say) ends, in the common case, by storing the call's result,
answering it with a tool message and handing the turn on to its next model step. The general
way (`tool_batch._advance`) does that in a fenced transaction of five statements, seven round
trips with its BEGIN and COMMIT; here it is one statement that commits by itself.

It decides nothing the general way would decide otherwise: it declines, writing nothing, unless
the fence still holds, the turn is at this batch, no cancel or feedback waits on it, and the
call is still running; the general way then says what is wrong or what comes instead. The turn
is locked first, as every writer of a turn's calls locks it (`calls.finish_waiting` takes the
turn, then the call), so the call is read as the last such writer left it. Each write after
that is for the rows the one before it returned, so the statement writes all of it or nothing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import sqlalchemy
from sqlalchemy import Select, bindparam, func, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import col, select

from app.engine import calls
from app.engine.outbox import Outbox
from app.engine.turns import message_stored, typed
from app.events import EventType, Fence
from app.metrics import recording
from app.runtime import Runtime
from app.storage.models import (
    CallStatus,
    ToolCall,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    WorkstreamState,
    utcnow,
)
from app.taskqueue import MODEL_STEP_TASK
from app.tools.base import ToolOutcome


class HandedOn(NamedTuple):
    """The batch has ended and its turn gone on to `step`; `claim` when this task runs it next."""

    step: int
    claim: Fence | None


def hand_on_at_once(
    rt: Runtime, out: Outbox, fence: Fence, step: int, row: ToolCall, outcome: ToolOutcome
) -> HandedOn | None:
    """End the batch of `step` whose only call is `row`, run to `outcome`, in one statement;
    None, with nothing written, where the general way must decide (and on another database).
    The call's `tool_result` and the workstream's `thinking` go out with `out`."""
    if not (rt.db.is_postgresql and rt.db.engine.dialect.update_returning):
        return None
    keep = rt.queue.will_keep(fence.turn_id, MODEL_STEP_TASK)
    now = utcnow()
    values = {
        "end_turn": fence.turn_id,
        "fenced_attempt": fence.attempt,
        "end_step": step,
        "next_step": step + 1,
        "call_row": row.id,
        "answered_call": row.call_id,
        "answered_tool": row.func_name,
        "call_output": outcome.output,
        "call_is_error": outcome.is_error,
        "now": now,
    }
    with rt.db.one_statement() as s:
        attempt = s.execute(_ENDS[keep], values).scalar_one_or_none()
    if attempt is None:
        return None
    finished = {
        "status": CallStatus.DONE,
        "output": outcome.output,
        "is_error": outcome.is_error,
        "finished_at": now,
        "process_group": None,
    }
    for key, value in finished.items():
        set_committed_value(row, key, value)
    recording.tool_call_ended(None, row.func_name, row.status, row.is_error)
    calls.announce(rt, row, fence, out)
    out.add(EventType.STATE_CHANGE, turn_id=fence.turn_id, fence=fence, state=WorkstreamState.THINKING)
    return HandedOn(step + 1, Fence(fence.turn_id, attempt) if keep else None)


def _end(keep: bool) -> Select[Any]:
    """The statement: the turn locked under its fence, then the call finished, then the turn
    handed on (claimed for this task when it `keep`s the next step, as `leases.hand_on`), then
    the call's tool message and the workstream's state. It returns the turn's new attempt."""
    held = (
        select(Turn.id)
        .where(
            col(Turn.id) == bindparam("end_turn"),
            col(Turn.attempt) == bindparam("fenced_attempt"),
            col(Turn.status) == TurnStatus.ACTIVE,
            col(Turn.phase) == TurnPhase.TOOLS,
            col(Turn.step) == bindparam("end_step"),
            col(Turn.cancel_requested).is_(False),
            col(Turn.feedback).is_(None),
        )
        .with_for_update()
        .cte("held")
    )
    # No parameter is named as a column of a table it updates: an UPDATE takes one as a value to set.
    finished = (
        update(ToolCall)
        .where(
            col(ToolCall.id) == bindparam("call_row"),
            col(ToolCall.turn_id) == held.c.id,
            col(ToolCall.status) == CallStatus.RUNNING,
        )
        .values(
            status=CallStatus.DONE,
            output=typed(ToolCall, "output", "call_output"),
            is_error=typed(ToolCall, "is_error", "call_is_error"),
            finished_at=bindparam("now"),
            process_group=None,
        )
        .returning(col(ToolCall.turn_id))
        .cte("finished")
    )
    handed = (
        update(Turn)
        .where(col(Turn.id) == finished.c.turn_id)
        .values(
            phase=TurnPhase.MODEL,
            step=bindparam("next_step"),
            attempt=Turn.attempt + 1 if keep else Turn.attempt,
            step_claims=1 if keep else 0,
            heartbeat_at=func.clock_timestamp() if keep else None,
            phase_started_at=func.clock_timestamp(),
            enqueued_at=func.clock_timestamp(),
        )
        .returning(col(Turn.id), col(Turn.ws_id), col(Turn.attempt))
        .cte("handed")
    )
    answered = message_stored(
        "tool",
        handed.c.ws_id,
        handed.c.id,
        is_error="call_is_error",
        content="call_output",
        tool_call_id="answered_call",
        name="answered_tool",
        created_at="now",
    )
    thinking = (
        update(Workstream)
        .where(col(Workstream.id) == handed.c.ws_id)
        .values(state=WorkstreamState.THINKING, updated_at=bindparam("now"))
        .returning(col(Workstream.id))
        .cte("thinking")
    )
    joined = handed.join(answered, sqlalchemy.true()).join(thinking, sqlalchemy.true())
    return sqlalchemy.select(handed.c.attempt).select_from(joined)


_ENDS = {keep: _end(keep) for keep in (True, False)}
