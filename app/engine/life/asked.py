"""A step's answer that asks for tool calls: stored with its calls, and the turn parked for a
person's decision or handed on to its batch, as one transition (one statement on PostgreSQL,
one transaction on SQLite: `app.engine.life.transition`).

The calls are decided (`calls.new_row`) from the workstream as the step read it. What the
statement checks is what those decisions rest on: the turn still under its fence in this
step's model phase with no cancel asked, and, where a call is approved because the workstream
approves every call, the workstream still approving every call (one turned off while the model
answered is heeded: the caller reads it again and decides again). Labels a person marked
"always" are only ever added, so an approval they gave stands. Read paths and deferred tools the
calls bring into view join the workstream's as the step read them: only this turn's phases,
one at a time, write them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import sqlalchemy
from sqlalchemy import bindparam, update
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import col, select

from app.engine.life import calls
from app.engine.life.transition import Step, Steps, run_alone
from app.engine.life.turns import message_stored
from app.engine.publishing.outbox import Outbox
from app.engine.running import leases
from app.engine.running.handoff import will_keep
from app.events import EventType, Fence
from app.jobs import policing
from app.metrics import recording
from app.runtime import Runtime
from app.storage.database import typed
from app.storage.models import CallStatus, ToolCall, Turn, TurnPhase, Workstream, WorkstreamState, utcnow
from app.taskqueue import TOOL_BATCH_TASK

# The call's columns its row is stored with (a nested INSERT fills in no column default).
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
    "decided_by",
    "output",
    "is_error",
    "catalog_version",
    "policy_rule",
    "verdict",
    "created_at",
    "started_at",
    "finished_at",
    "runner",
]
ANSWER_KEYS = ("content", "reasoning", "usage", "server_blocks", "model")
_WORKSTREAM_COLUMNS = list(Workstream.__table__.c)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Asked:
    """An answer's calls, decided, and what the workstream gains from them."""

    rows: list[ToolCall]  # `calls.new_row`, in the model's order
    asked_as: list[dict[str, Any]]  # the calls as the assistant message lists them
    read_paths: list[str]  # the workstream's read paths with the calls' (sorted)
    expanded_tools: list[str] | None  # the workstream's expanded tools, when the answer adds some
    known: list[bool]  # whether each call's tool is one the step offered (for the metrics)


def store(
    rt: Runtime,
    out: Outbox,
    fence: Fence,
    ws: Workstream,
    step: int,
    asked: Asked,
    answer: dict[str, Any],
) -> tuple[Fence | None, calls.StartedCall | None] | None | Literal[False]:
    """Store the answer of `step` with its calls and park the turn (some call waits for a
    person: None) or hand it on to its batch: the batch's claim when this task runs it next,
    and then a batch of one approved call started here too (stored running, `StartedCall`).
    False, with nothing written, where the fence is gone, a cancel was asked or the workstream
    no longer approves every call: the caller reads again and decides."""
    rows = asked.rows
    waiting = any(r.status == CallStatus.PENDING for r in rows)
    keep = not waiting and will_keep(rt, fence.turn_id, TOOL_BATCH_TASK)
    if keep and len(rows) == 1 and rows[0].status == CallStatus.APPROVED:
        calls.start_as_handed_on(rows[0])
    approves_all = any(r.decided_how == "auto" for r in rows) and ws.auto_approve
    judged = any(r.decided_how == calls.SMART for r in rows) and ws.smart_approve
    grown = asked.read_paths != sorted(ws.read_paths)
    values = {
        **leases.fenced_values(fence, step),
        "now": utcnow(),
        "store_state": WorkstreamState.ATTENTION if waiting else WorkstreamState.RUNNING,
        "ws_read_paths": asked.read_paths,
        "ws_expanded_tools": asked.expanded_tools,
        "answer_tool_calls": asked.asked_as,
        **{f"answer_{key}": answer[key] for key in ANSWER_KEYS},
    }
    for n, row in enumerate(rows):
        values.update({f"call{n}_{column}": getattr(row, column) for column in CALL_COLUMNS})
    shape = (len(rows), waiting, keep, approves_all, judged, grown, asked.expanded_tools is not None)
    done = run_alone(rt.db, _stores(*shape), values)
    if done is None:
        return False
    for stored in done.all("called"):
        rows[stored["position"]].id = stored["id"]
    written = done.first("running")
    assert written is not None
    fresh = Workstream(**{column.name: written[column.name] for column in _WORKSTREAM_COLUMNS})
    for stored_row in (*rows, fresh):  # as an ORM transaction leaves them: stored, in no session
        make_transient_to_detached(stored_row)
    _announce(rt, out, fence, step, asked, waiting)
    if waiting:
        turn_id = fence.turn_id
        out.after(lambda rt: policing.on_parked(rt, turn_id))  # a run's policy decides first
        if rt.settings.judge:  # a judge model's second opinion, beside the person's decision
            out.after(lambda rt: rt.queue.judge(ws.id, turn_id, step))
        if ws.notify_approvals and ws.owner_id:  # the owner told through their channels
            out.after(lambda rt: rt.queue.push_approval(ws.id, turn_id, step))
        return None
    claim = Fence(fence.turn_id, fence.attempt + 1) if keep else None
    started = rows[0].status == CallStatus.RUNNING and len(rows) == 1
    return claim, calls.StartedCall(fresh, rows[0]) if started else None


def _announce(rt: Runtime, out: Outbox, fence: Fence, step: int, asked: Asked, waiting: bool) -> None:
    turn_id = fence.turn_id
    items = [calls.item(r) for r in asked.rows]
    out.add(
        EventType.APPROVE_REQUEST if waiting else EventType.TOOL_INFO,
        turn_id=turn_id,
        fence=fence,
        step=step,
        items=items,
    )
    for row, known in zip(asked.rows, asked.known, strict=True):
        if row.status in (CallStatus.ERROR, CallStatus.DENIED):  # refused at prepare, or by a rule
            calls.announce(rt, row, fence, out)
            name = row.func_name if known else recording.UNKNOWN_TOOL
            recording.tool_call_ended(None, name, row.status, row.is_error)  # committed already
    state = WorkstreamState.ATTENTION if waiting else WorkstreamState.RUNNING
    out.add(EventType.STATE_CHANGE, turn_id=turn_id, fence=fence, state=state)


@cache  # built when first run, for the shapes a worker meets
def _stores(
    n: int, waiting: bool, keep: bool, approves_all: bool, judged: bool, grown: bool, found: bool
) -> Steps:
    """The steps for an answer asking for `n` calls: the turn locked under its fence in this
    step's model phase; the workstream `attention` or `running` (`approves_all`: only if it still
    approves every call; `judged`: only if it still lets the judge approve), with the read paths
    (`grown`) and expanded tools (`found`) the calls add, returned as written; the assistant
    message; the calls; the turn parked for a decision (`waiting`) or handed on to its batch
    (`keep`: claimed for this task)."""
    held = Step(
        "held",
        lambda ref: (
            select(col(Turn.id), col(Turn.ws_id)).where(*leases.fenced_at(TurnPhase.MODEL)).with_for_update()
        ),
    )
    approving = [col(Workstream.auto_approve).is_(True)] if approves_all else []
    if judged:
        approving.append(col(Workstream.smart_approve).is_(True))
    gained = {}
    if grown:
        gained["read_paths"] = typed(Workstream, "read_paths", "ws_read_paths")
    if found:
        gained["expanded_tools"] = typed(Workstream, "expanded_tools", "ws_expanded_tools")
    running = Step(
        "running",
        lambda ref: (
            update(Workstream)
            .where(col(Workstream.id) == ref("held", "ws_id"), *approving)
            .values(state=bindparam("store_state"), updated_at=bindparam("now"), **gained)
            .returning(*_WORKSTREAM_COLUMNS)
        ),
    )
    message = Step(
        "asked",
        lambda ref: message_stored(
            "assistant",
            ref("running", "id"),
            ref("held", "id"),
            content="answer_content",
            reasoning="answer_reasoning",
            usage="answer_usage",
            server_blocks="answer_server_blocks",
            model="answer_model",
            tool_calls="answer_tool_calls",
            created_at="now",
        ),
    )

    def called(ref: Any) -> Any:
        each = [
            sqlalchemy.select(
                *(typed(ToolCall, column, f"call{i}_{column}") for column in CALL_COLUMNS)
            ).where(ref("asked", "id").is_not(None))
            for i in range(n)
        ]
        rows = each[0] if n == 1 else sqlalchemy.union_all(*each)
        stored = sqlalchemy.insert(ToolCall).from_select(CALL_COLUMNS, rows, include_defaults=False)
        return stored.returning(col(ToolCall.id), col(ToolCall.position))

    handed = Step(
        "handed",
        lambda ref: (
            update(Turn)
            .where(
                col(Turn.id) == ref("held", "id"), *leases.fenced_at(TurnPhase.MODEL)
            )  # the state it leaves
            .values(
                phase=TurnPhase.APPROVAL if waiting else TurnPhase.TOOLS, **leases.handed_on(keep, ref.clock)
            )
            .returning(col(Turn.id))
        ),
    )
    return Steps([held, running, message, Step("called", called), handed], whole="called")
