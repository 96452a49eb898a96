"""The end of a batch of one call, the common way, in as few steps as it takes.

A batch whose only call its model step started (`calls.StartedCall`: a bash command the
workstream auto-approves, say) ends, in the common case, by storing the call's result,
answering it with a tool message and handing the turn on to its next model step. The general
way (`tool_batch._advance`) does that in a fenced transaction through the ORM: five statements,
seven round trips on PostgreSQL with its BEGIN and COMMIT. Here it is one statement that commits
by itself on PostgreSQL, and on SQLite four prepared statements in one transaction, without the
ORM's work on the session's objects.

It decides nothing the general way would decide otherwise: it declines, writing nothing, unless
the fence still holds, the turn is at this batch, no cancel or feedback waits on it, and the
call is still running; the general way then says what is wrong or what comes instead. On
PostgreSQL the turn is locked first, as every writer of a turn's calls locks it
(`calls.finish_waiting` takes the turn, then the call), so the call is read as the last such
writer left it; each write after that is for the rows the one before it returned, so the
statement writes all of it or nothing. SQLite's transaction holds the whole file from its
first statement (BEGIN IMMEDIATE), and is rolled back where a step finds no row.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

import sqlalchemy
from sqlalchemy import Insert, Select, Update, bindparam, func, insert, update
from sqlmodel import col, select

from app.engine import calls, leases
from app.engine.outbox import Outbox
from app.engine.turns import message_stored
from app.events import EventType, Fence
from app.runtime import Runtime
from app.storage.database import typed
from app.storage.models import (
    CallStatus,
    Message,
    ToolCall,
    Turn,
    TurnPhase,
    Workstream,
    WorkstreamState,
)
from app.taskqueue import MODEL_STEP_TASK
from app.tools.base import ToolOutcome


class HandedOn(NamedTuple):
    """The batch has ended and its turn gone on to `step`; `claim` when this task runs it next."""

    step: int
    claim: Fence | None


def hand_on_at_once(
    rt: Runtime, out: Outbox, fence: Fence, ws_id: str, step: int, row: ToolCall, outcome: ToolOutcome
) -> HandedOn | None:
    """End the batch of `step` whose only call is `row`, run to `outcome`; None, with nothing
    written, where the general way must decide. The call's `tool_result` and the workstream's
    `thinking` go out with `out`."""
    keep = rt.queue.will_keep(fence.turn_id, MODEL_STEP_TASK)
    result = calls.finished(outcome.output, outcome.is_error)
    values = {
        **leases.fenced_values(fence, step),
        "end_ws": ws_id,
        "next_step": step + 1,
        "call_row": row.id,
        "answered_call": row.call_id,
        "answered_tool": row.func_name,
        "call_output": outcome.output,
        "call_is_error": outcome.is_error,
        "now": result["finished_at"],
    }
    if rt.db.is_postgresql:
        with rt.db.one_statement() as s:
            if s.execute(_one_statement(keep), values).first() is None:
                return None
    elif not _ended_in_steps(rt, keep, {**values, "lease_now": rt.db.now()}):
        return None
    calls.moved(None, row, result)  # committed already
    calls.announce(rt, row, fence, out)
    out.add(EventType.STATE_CHANGE, turn_id=fence.turn_id, fence=fence, state=WorkstreamState.THINKING)
    return HandedOn(step + 1, Fence(fence.turn_id, fence.attempt + 1) if keep else None)


def _ended_in_steps(rt: Runtime, keep: bool, values: dict[str, Any]) -> bool:
    """The end as `_steps` in one transaction; rolled back, and False, where a step finds no row."""
    handed, finished, answered, thinking = _steps(keep)
    with rt.db.session() as s:
        conn = s.connection()
        if conn.execute(handed, values).rowcount != 1 or conn.execute(finished, values).rowcount != 1:
            s.rollback()
            return False
        conn.execute(answered, values)
        conn.execute(thinking, values)
    return True


# The turn as the batch holds it, with no feedback waiting. No parameter is named as a column of
# a table a statement here updates: an UPDATE takes one as a value to set.
_HELD = [*leases.fenced_at(TurnPhase.TOOLS), col(Turn.feedback).is_(None)]


def _handed_on(keep: bool, now: Any) -> dict[str, Any]:
    """The turn handed on to its next step (`leases.handed_on`); `now` is the lease clock."""
    return {"phase": TurnPhase.MODEL, "step": bindparam("next_step"), **leases.handed_on(keep, now)}


_FINISHED = {
    "status": CallStatus.DONE,
    "output": typed(ToolCall, "output", "call_output"),
    "is_error": typed(ToolCall, "is_error", "call_is_error"),
    "finished_at": bindparam("now"),
    "process_group": None,
}
_ANSWER = {
    "content": "call_output",
    "tool_call_id": "answered_call",
    "name": "answered_tool",
    "created_at": "now",
}
_THINKING = {"state": WorkstreamState.THINKING, "updated_at": bindparam("now")}


@cache  # built when first run: a worker builds only its database's, and only those it runs
def _steps(keep: bool) -> tuple[Update, Update, Insert, Update]:
    """SQLite's steps: the turn handed on under its fence (the check comes first), the call
    finished if still running, its tool message, the workstream's state."""
    handed = update(Turn).where(*_HELD).values(**_handed_on(keep, bindparam("lease_now")))
    finished = (
        update(ToolCall)
        .where(
            col(ToolCall.id) == bindparam("call_row"),
            col(ToolCall.turn_id) == bindparam("fenced_turn"),
            col(ToolCall.status) == CallStatus.RUNNING,
        )
        .values(**_FINISHED)
    )
    answer = {column: typed(Message, column, name) for column, name in _ANSWER.items()}
    answered = insert(Message).values(
        ws_id=bindparam("end_ws"),
        turn_id=bindparam("fenced_turn"),
        role="tool",
        is_error=typed(Message, "is_error", "call_is_error"),
        **answer,
    )
    thinking = update(Workstream).where(col(Workstream.id) == bindparam("end_ws")).values(**_THINKING)
    return handed, finished, answered, thinking


@cache
def _one_statement(keep: bool) -> Select[Any]:
    """PostgreSQL's statement: the turn locked under its fence, then the call finished, then the
    turn handed on, then the call's tool message and the workstream's state."""
    held = select(Turn.id).where(*_HELD).with_for_update().cte("held")
    finished = (
        update(ToolCall)
        .where(
            col(ToolCall.id) == bindparam("call_row"),
            col(ToolCall.turn_id) == held.c.id,
            col(ToolCall.status) == CallStatus.RUNNING,
        )
        .values(**_FINISHED)
        .returning(col(ToolCall.turn_id))
        .cte("finished")
    )
    handed = (
        update(Turn)
        .where(col(Turn.id) == finished.c.turn_id)
        .values(**_handed_on(keep, func.clock_timestamp()))
        .returning(col(Turn.id), col(Turn.ws_id))
        .cte("handed")
    )
    answered = message_stored("tool", handed.c.ws_id, handed.c.id, is_error="call_is_error", **_ANSWER)
    thinking = (
        update(Workstream)
        .where(col(Workstream.id) == handed.c.ws_id)
        .values(**_THINKING)
        .returning(col(Workstream.id))
        .cte("thinking")
    )
    joined = handed.join(answered, sqlalchemy.true()).join(thinking, sqlalchemy.true())
    return sqlalchemy.select(handed.c.id).select_from(joined)
