"""A run's contract kept: calls its policy approves are approved for it when its turn parks, a
call that would need a person fails it under `deny_unapproved`, and a run past its deadline is
ended. Each is done when the turn parks and again by beat's sweep, so a process that dies in
between loses none of it; each step is conditional, so doing one twice changes nothing."""

from __future__ import annotations

import contextlib
import logging

from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from app.engine.life import approvals, cancel
from app.engine.life import calls as call_store
from app.errors import ConflictError, NotFoundError
from app.jobs.contract import Policy
from app.jobs.status import EndReason
from app.policies.rules import is_asked
from app.runtime import Runtime
from app.storage.models import CallStatus, Run, Turn, TurnPhase, TurnStatus, Workstream

log = logging.getLogger(__name__)

POLICY_BY = "run policy"  # who a policy's decisions are stored as made by
POLICY_HOW = "policy"
DENIED_FEEDBACK = "the run's policy denies calls that need a person's approval"
MAX_DEPTH = 4  # generations a policy reaches down: a run, a coordinator's child, its sub-agent


def on_parked(rt: Runtime, turn_id: str) -> None:
    """The turn `turn_id` parked for a decision: the policy of the run it belongs to (its own,
    or the run whose turn started it: a task_agent's child, a coordinator's child started
    while the run's turn runs) decides what it may; under `deny_unapproved` a call it does not
    approve is denied where it waits and fails the run, so no person is waited for."""
    with rt.db.reader() as s:
        turn = s.get(Turn, turn_id)
        if turn is None or turn.phase != TurnPhase.APPROVAL or turn.status != TurnStatus.ACTIVE:
            return
        run = governing_run(s, turn)
        if run is None:
            return
        pending = [r for r in call_store.batch(s, turn.id, turn.step) if r.status == CallStatus.PENDING]
    policy = Policy.from_stored(run.policy)
    if policy.is_empty or not pending:
        return
    # A call an admin's rule asks a person about is never the run's policy to approve.
    refused = [r for r in pending if is_asked(r.policy_rule) or not policy.approves(r.func_name)]
    if refused and policy.deny_unapproved:
        names = ", ".join(sorted({r.func_name for r in refused}))
        where = "" if turn.id == run.turn_id else " by a sub-agent"
        note = f"a call{where} needed a person's approval ({names}); the run's policy denies unapproved calls"
        if turn.id != run.turn_id:  # the child's own turn ends too (a coordinator's child outlives the run)
            for row in refused:
                _decide(rt, turn.ws_id, row.call_id, approved=False, feedback=DENIED_FEEDBACK)
        end(rt, run, EndReason.POLICY, note)
        return
    for row in pending:
        if row not in refused:
            _decide(rt, turn.ws_id, row.call_id, approved=True)


def governing_run(s: Session, turn: Turn) -> Run | None:
    """The run whose policy governs `turn`: its own, else (up to `MAX_DEPTH` generations) the
    run of the turn that started its workstream: a task_agent child's parent call's turn, a
    coordinator child's coordinator's running turn."""
    current: Turn | None = turn
    for _ in range(MAX_DEPTH):
        if current is None:
            return None
        run = s.exec(select(Run).where(Run.turn_id == current.id)).first()
        if run is not None:
            return run
        ws = s.get(Workstream, current.ws_id)
        parent_turn = ws.parent_turn_id if ws is not None else None
        if parent_turn is None and ws is not None and ws.parent_id is not None:
            parent = s.get(Workstream, ws.parent_id)
            parent_turn = parent.active_turn_id if parent is not None else None
        current = s.get(Turn, parent_turn) if parent_turn else None
    return None


def _decide(rt: Runtime, ws_id: str, call_id: str, approved: bool, feedback: str | None = None) -> None:
    decision = approvals.Decision(
        approved=approved, feedback=feedback, call_id=call_id, by=POLICY_BY, how=POLICY_HOW, via="policy"
    )
    # decided meanwhile (a person, the turn's cancel): that decision stands
    with contextlib.suppress(ConflictError, NotFoundError):
        approvals.decide(rt, ws_id, decision)


def end(rt: Runtime, run: Run, reason: EndReason, note: str | None = None) -> None:
    """End the run's turn for `reason`, stored first (once: a first reason stands), so that the
    cancelled turn reads as the run's failure or time-out."""
    with rt.db.session() as s:
        s.exec(
            update(Run)
            .where(col(Run.id) == run.id, col(Run.end_reason).is_(None))
            .values(end_reason=reason, end_note=note)
        )
    stop(rt, run, by=reason)


def stop(rt: Runtime, run: Run, by: str) -> bool:
    """Cancel the run's turn wherever it stands (and the sub-agents it started); False when it
    had ended already."""
    if run.turn_id is None:
        return False
    try:
        done = cancel.cancel(rt, run.ws_id, by=by, turn_id=run.turn_id)
    except (ConflictError, NotFoundError):
        return False
    if not done.ended:
        cancel.stop_children(rt, done.turn_id, by=by)
    return True


def sweep(rt: Runtime) -> int:
    """Beat's part: runs past their deadline ended, runs whose end was stored but whose turn
    still runs (a process died between the two) ended, parked runs with a policy decided.
    The number of runs acted on."""
    now = rt.db.now()
    live = col(Turn.status).in_([TurnStatus.QUEUED, TurnStatus.ACTIVE])
    with rt.db.reader() as s:
        overdue = s.exec(
            select(Run)
            .join(Turn, col(Turn.id) == col(Run.turn_id))
            .where(live, or_(col(Run.deadline_at) < now, col(Run.end_reason).is_not(None)))
            .where(col(Turn.cancel_requested).is_(False))
        ).all()
        parked = list(
            s.exec(
                select(Run.turn_id)
                .join(Turn, col(Turn.id) == col(Run.turn_id))
                .where(col(Turn.status) == TurnStatus.ACTIVE, col(Turn.phase) == TurnPhase.APPROVAL)
            ).all()
        )
        # children's parked turns: a run's policy may govern them (on_parked finds out)
        parked += s.exec(
            select(Turn.id)
            .join(Workstream, col(Workstream.id) == col(Turn.ws_id))
            .where(
                col(Turn.status) == TurnStatus.ACTIVE,
                col(Turn.phase) == TurnPhase.APPROVAL,
                col(Workstream.parent_id).is_not(None),
            )
        ).all()
    for run in overdue:
        if run.end_reason is None:
            log.info("run %s: past its timeout of %s s, ending it", run.id, run.timeout_s)
        end(rt, run, EndReason(run.end_reason or EndReason.TIMED_OUT), run.end_note)
    for turn_id in parked:
        if turn_id is not None:
            on_parked(rt, turn_id)
    return len(overdue) + len(parked)
