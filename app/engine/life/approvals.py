"""Decisions on pending calls: approve, deny, feedback, "always"; the last one un-parks the turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from app.engine.life import calls as call_store
from app.engine.life import edits
from app.engine.publishing.outbox import Outbox, ordered
from app.errors import ConflictError, NotFoundError
from app.events import EventType
from app.policies.rules import is_asked
from app.runtime import Runtime
from app.storage.models import CallStatus, ToolCall, Turn, TurnPhase, Workstream, WorkstreamState
from app.tools.core.tool import approval_label


@dataclass(frozen=True)
class Decision:
    approved: bool
    feedback: str | None = None
    always: bool = False
    call_id: str | None = None  # None: every pending call of the workstream
    by: str = "user"
    how: str = "user"
    by_id: str | None = None  # the deciding user's id; None: the operator
    via: str | None = None  # http, websocket, cli
    arguments: dict[str, Any] | None = None  # call_id runs with these instead of the model's (edits.py)


@dataclass(frozen=True)
class DecisionResult:
    decided: list[str]
    pending: list[str]
    resumed: bool

    def as_dict(self) -> dict[str, Any]:
        return {"decided": self.decided, "pending": self.pending, "resumed": self.resumed}


def decide(rt: Runtime, ws_id: str, decision: Decision) -> DecisionResult:
    with ordered(rt, ws_id) as out, rt.db.session() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        # Lock the turn first: two deciders of different calls must not both see the
        # other's call still pending and leave the turn parked for ever.
        turn = s.get(Turn, ws.active_turn_id, with_for_update=True) if ws.active_turn_id else None
        rows = call_store.batch(s, turn.id, turn.step) if turn else []
        pending = [r for r in rows if r.status == CallStatus.PENDING]
        earlier = None
        if decision.call_id is not None and all(r.call_id != decision.call_id for r in rows):
            earlier = _decided_before(s, ws_id, decision.call_id)
        targets = _targets(rows, pending, decision, earlier)
        if not targets:  # the same decision again: nothing to do
            return DecisionResult([], [r.call_id for r in pending], resumed=False)
        if decision.always and decision.approved:
            labels = {approval_label(r.func_name, r.args) for r in targets}
            ws.auto_approve_tools = sorted(set(ws.auto_approve_tools) | labels)
            targets += [  # the batch's other calls "always" now covers; never one a policy rule asks about
                r
                for r in pending
                if r not in targets
                and approval_label(r.func_name, r.args) in ws.auto_approve_tools
                and not is_asked(r.policy_rule)
            ]
            s.add(ws)
        how = "always" if decision.always and decision.approved else decision.how
        edited = decision.arguments is not None and decision.approved
        if edited:  # one call, named (commands.approve): checked before anything is decided
            assert decision.arguments is not None and len(targets) == 1
            edits.check(rt, ws, targets[0], decision.arguments)
        targets = [
            r
            for r in targets
            if call_store.decide(
                s,
                r,
                decision.approved,
                decision.feedback,
                decision.by,
                how,
                by_id=decision.by_id,
                via=decision.via,
                arguments=decision.arguments if edited else None,
            )
        ]
        told = [edits.note(decision.by, r) for r in targets if edited]
        if decision.approved and (decision.feedback or told) and turn is not None:
            turn.feedback = "\n".join(filter(None, [turn.feedback, *told, decision.feedback]))
            s.add(turn)
        still = [r.call_id for r in pending if r not in targets]
        resumed = not still and turn is not None and _unpark(rt, s, turn)
        _announce(rt, out, turn, targets, decision, resumed)
    if resumed and turn is not None:
        rt.queue.tool_batch(turn.id, turn.step)
    return DecisionResult([r.call_id for r in targets], still, resumed)


def _announce(
    rt: Runtime, out: Outbox, turn: Turn | None, targets: list[ToolCall], d: Decision, resumed: bool
) -> None:
    edited: dict[str, Any] = (
        {"arguments": d.arguments} if d.arguments is not None and d.approved and targets else {}
    )
    out.add(
        EventType.APPROVAL_RESOLVED,
        turn_id=turn.id if turn else None,
        call_ids=[r.call_id for r in targets],
        approved=d.approved,
        feedback=d.feedback,
        always=d.always,
        by=d.by,
        how=d.how,
        via=d.via,
        **edited,
    )
    for row in targets:
        if row.status == CallStatus.DENIED:
            call_store.announce(rt, row, out=out)
    if resumed and turn is not None:
        out.add(EventType.STATE_CHANGE, turn_id=turn.id, state=WorkstreamState.RUNNING)


def _decided_before(s: Any, ws_id: str, call_id: str) -> ToolCall | None:
    """The workstream's last call of that id outside the batch waiting now, once it was decided:
    a decision repeated after its batch ran (a retry whose first answer was lost) is
    answered from it."""
    row: ToolCall | None = s.exec(
        select(ToolCall)
        .where(col(ToolCall.ws_id) == ws_id, col(ToolCall.call_id) == call_id)
        .order_by(col(ToolCall.id).desc())
        .limit(1)
    ).first()
    return row if row is not None and row.status != CallStatus.PENDING else None


def _targets(
    rows: list[ToolCall], pending: list[ToolCall], d: Decision, earlier: ToolCall | None = None
) -> list[ToolCall]:
    """The calls `d` decides now; [] for a repeat of a person's decision (the call in the batch
    waiting now, or `earlier`, the same call after its batch went on); ConflictError else."""
    if d.call_id is None:
        if pending:
            return list(pending)
        # Nothing left to decide. A repeat of what a person already decided for the whole
        # batch (a retried request, a second click) changes nothing; anything else conflicts.
        by_person = [r for r in rows if r.decided_how in ("user", "always")]
        if by_person and all((r.status != CallStatus.DENIED) == d.approved for r in by_person):
            return []
        raise ConflictError("no calls are pending approval", pending=[])
    row = next((r for r in rows if r.call_id == d.call_id), earlier)
    if row is not None and row.status != CallStatus.PENDING and row.decided_how in ("user", "always"):
        if (row.status != CallStatus.DENIED) == d.approved:
            return []  # decided the same way before: a no-op
        raise ConflictError(
            f"call {d.call_id} was already {'approved' if row.status != CallStatus.DENIED else 'denied'}",
            pending=[r.call_id for r in pending],
        )
    if row is None or row.status != CallStatus.PENDING:
        names = ", ".join(r.call_id for r in pending) or "none"
        raise ConflictError(
            f"call {d.call_id} is not pending; pending: {names}", pending=[r.call_id for r in pending]
        )
    return [row]


def _unpark(rt: Runtime, s: Any, turn: Turn) -> bool:
    """Move the parked turn on to its tool batch; exactly one decider wins this."""
    now = rt.db.now()
    moved = s.exec(
        update(Turn)
        .where(col(Turn.id) == turn.id, col(Turn.phase) == TurnPhase.APPROVAL)
        .values(phase=TurnPhase.TOOLS, enqueued_at=now, phase_started_at=now, step_claims=0, step_failures=0)
    )
    if moved.rowcount == 1:
        s.exec(
            update(Workstream).where(col(Workstream.id) == turn.ws_id).values(state=WorkstreamState.RUNNING)
        )
    return bool(moved.rowcount == 1)
