"""A step's answer that asks for one call nobody needs to approve, stored in as few steps as it
takes.

The general way (`model_step._store_reply`) stores such an answer in a fenced transaction
through the ORM: the fence, the assistant message, the workstream read again, the call, the
turn handed on to its batch, the workstream `running`; eight round trips on PostgreSQL with its
BEGIN and COMMIT. Here it is one statement that commits by itself on PostgreSQL, and on SQLite
four prepared statements in one transaction.

It decides nothing the general way would decide otherwise: it declines, writing nothing, unless
the fence still holds, the turn is in this step's model phase with no cancel asked, and the call
needs no person as the workstream now is: the tool needs no approval, or the workstream approves
every call (`auto_approve`, read again as the workstream is written, so that one turned off
while the model answered is heeded). A call approved by a tool the workstream lists, one the
step could not prepare, calls that add read paths or bring deferred tools into view: all go the
general way. On PostgreSQL the turn is locked first, then the workstream, as the general way
and every other writer lock them; each write after that is for the rows the one before it
returned, so the statement writes all of it or nothing. SQLite's transaction holds the whole
file from its first statement, and is rolled back where a step finds no row.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import sqlalchemy
from sqlalchemy import ColumnElement, Insert, Select, Update, bindparam, func, insert, update
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import col, select

from app.engine import calls, leases
from app.engine.calls import StartedCall
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
    utcnow,
)
from app.taskqueue import TOOL_BATCH_TASK
from app.tools.pipeline import PreparedCall

# The call's columns the statements name (a nested INSERT fills in no column default); each
# takes the parameter `call_<column>`.
CALL_COLUMNS = [
    "ws_id",
    "turn_id",
    "step",
    "position",
    "call_id",
    "func_name",
    "args",
    "header",
    "preview",
    "needs_approval",
    "error",
    "status",
    "decided_how",
    "output",
    "is_error",
    "catalog_version",
    "created_at",
    "started_at",
    "runner",
]
ANSWER_KEYS = ("content", "reasoning", "usage", "server_blocks")


def store_at_once(
    rt: Runtime,
    out: Outbox,
    fence: Fence,
    ws: Workstream,
    step: int,
    p: PreparedCall,
    asked: dict[str, Any],
    catalog_version: str | None,
    answer: dict[str, Any],
) -> tuple[Fence | None, StartedCall | None] | None:
    """Store the answer of `step` (`answer`: its content, reasoning, usage and server_blocks)
    with its one call `p`, prepared, as the model `asked` for it, and hand the turn on to its
    batch: the batch's claim and the call, stored running, when this task runs the batch next
    (as `model_step._park_or_go` gives them). None, with nothing written, where the general way
    must decide. The call's `tool_info` and the workstream's `running` go out with `out`."""
    if not rt.db.engine.dialect.update_returning:
        return None  # SQLite before 3.35: the workstream as written is read the general way
    row = calls.new_row(ws, fence.turn_id, step, 0, p, catalog_version)
    if row.status != CallStatus.APPROVED or (p.needs_approval and not ws.auto_approve):
        return None  # a person decides, or a label the workstream lists approved it: read again
    keep = rt.queue.will_keep(fence.turn_id, TOOL_BATCH_TASK)
    if keep:
        calls.start_as_handed_on(row)
    values = {
        **leases.fenced_values(fence, step),
        "store_ws": ws.id,
        "now": utcnow(),
        "answer_tool_calls": [asked],
        **{f"answer_{key}": answer[key] for key in ANSWER_KEYS},
        **{f"call_{column}": getattr(row, column) for column in CALL_COLUMNS},
    }
    variant = (keep, p.needs_approval)
    if rt.db.is_postgresql:
        with rt.db.one_statement() as s:
            stored = s.execute(_one_statement(*variant), values).first()
        if stored is None:
            return None
        row.id, columns = stored[0], stored._mapping
    else:
        found = _stored_in_steps(rt, variant, {**values, "lease_now": rt.db.now()})
        if found is None:
            return None
        row.id, columns = found
    fresh = Workstream(**{column.name: columns[column.name] for column in _WORKSTREAM_COLUMNS})
    for stored_row in (row, fresh):  # as the general way leaves them: stored, in no session
        make_transient_to_detached(stored_row)
    out.add(EventType.TOOL_INFO, turn_id=fence.turn_id, fence=fence, step=step, items=[calls.item(row)])
    out.add(EventType.STATE_CHANGE, turn_id=fence.turn_id, fence=fence, state=WorkstreamState.RUNNING)
    if not keep:
        return None, None
    return Fence(fence.turn_id, fence.attempt + 1), StartedCall(fresh, row)


def _stored_in_steps(
    rt: Runtime, variant: tuple[bool, bool], values: dict[str, Any]
) -> tuple[int, Any] | None:
    """The answer stored as `_steps` in one transaction: the call's row id and the workstream as
    written; rolled back, and None, where a step finds no row."""
    handed, running, asked, called = _steps(*variant)
    with rt.db.session() as s:
        conn = s.connection()
        fresh = conn.execute(running, values).first() if conn.execute(handed, values).rowcount == 1 else None
        if fresh is None:
            s.rollback()
            return None
        conn.execute(asked, values)
        call_row = conn.execute(called, values).inserted_primary_key
        assert call_row is not None
    return call_row[0], fresh._mapping


# The turn in this step's model phase under its fence. No parameter is named as a column of a
# table a statement here updates: an UPDATE takes one as a value to set.
_HELD = leases.fenced_at(TurnPhase.MODEL)
_WORKSTREAM_COLUMNS = list(Workstream.__table__.c)  # type: ignore[attr-defined]
_RUNNING = {"state": WorkstreamState.RUNNING, "updated_at": bindparam("now")}
_ASKED = {
    "content": "answer_content",
    "reasoning": "answer_reasoning",
    "usage": "answer_usage",
    "server_blocks": "answer_server_blocks",
    "tool_calls": "answer_tool_calls",
    "created_at": "now",
}


def _handed_on(keep: bool, now: Any) -> dict[str, Any]:
    """The turn handed on to its batch (`leases.handed_on`); `now` is the lease clock."""
    return {"phase": TurnPhase.TOOLS, **leases.handed_on(keep, now)}


def _workstream_held(approves_all: bool) -> list[ColumnElement[bool]]:
    """The workstream, approving every call when the call's approval rests on that."""
    held = [col(Workstream.id) == bindparam("store_ws")]
    return [*held, col(Workstream.auto_approve).is_(True)] if approves_all else held


def _call_values() -> list[Any]:
    return [typed(ToolCall, column, f"call_{column}") for column in CALL_COLUMNS]


@cache  # built when first run: a worker builds only its database's, and only those it runs
def _steps(keep: bool, approves_all: bool) -> tuple[Update, Update, Insert, Insert]:
    """SQLite's steps: the turn handed on under its fence (the check comes first), the workstream
    `running` (returned as written), the assistant message, the call."""
    handed = update(Turn).where(*_HELD).values(**_handed_on(keep, bindparam("lease_now")))
    running = (
        update(Workstream)
        .where(*_workstream_held(approves_all))
        .values(**_RUNNING)
        .returning(*_WORKSTREAM_COLUMNS)
    )
    message = {column: typed(Message, column, name) for column, name in _ASKED.items()}
    mine = {"ws_id": bindparam("store_ws"), "turn_id": bindparam("fenced_turn"), "role": "assistant"}
    asked = insert(Message).values(**mine, is_error=False, **message)
    called = insert(ToolCall).values(dict(zip(CALL_COLUMNS, _call_values(), strict=True)))
    return handed, running, asked, called


@cache
def _one_statement(keep: bool, approves_all: bool) -> Select[Any]:
    """PostgreSQL's statement: the turn locked under its fence, then the workstream `running`
    (returned as written), then the assistant message, the call and the turn handed on, each
    for the workstream's row."""
    held = select(Turn.ws_id).where(*_HELD).with_for_update().cte("held")
    running = (
        update(Workstream)
        .where(*_workstream_held(approves_all), col(Workstream.id) == held.c.ws_id)
        .values(**_RUNNING)
        .returning(*_WORKSTREAM_COLUMNS)
        .cte("running")
    )
    asked = message_stored("assistant", running.c.id, typed(Turn, "id", "fenced_turn"), **_ASKED).cte("asked")
    taken = sqlalchemy.select(*_call_values()).select_from(running)
    called = (
        insert(ToolCall)
        .from_select(CALL_COLUMNS, taken, include_defaults=False)
        .returning(col(ToolCall.id))
        .cte("called")
    )
    handed = (
        update(Turn)
        .where(col(Turn.id) == bindparam("fenced_turn"), col(Turn.ws_id) == running.c.id)
        .values(**_handed_on(keep, func.clock_timestamp()))
        .returning(col(Turn.id))
        .cte("handed")
    )
    joined: Any = running
    for written in (asked, called, handed):
        joined = joined.join(written, sqlalchemy.true())
    return sqlalchemy.select(called.c.id.label("call_row"), *running.c).select_from(joined)
