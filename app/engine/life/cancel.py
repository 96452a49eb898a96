"""Cancel: stop the running turn wherever it stands; the workstream takes the next message."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update
from sqlmodel import col, select

from app.engine.life import calls, turns
from app.engine.publishing.outbox import ordered
from app.engine.running.stop_check import raise_flag
from app.errors import ConflictError, NotFoundError
from app.events import EventType
from app.runtime import Runtime
from app.storage.models import CallStatus, Turn, TurnPhase, TurnStatus, Workstream, utcnow

# No task holds a turn in these phases: the cancel itself must end it.
PARKED_PHASES = (TurnPhase.APPROVAL, TurnPhase.AWAITING)


def cancel(rt: Runtime, ws_id: str, by: str = "user", turn_id: str | None = None) -> Cancelled:
    """Cancel a turn: the active one (only if it is `turn_id`, when given), or the queued turn
    `turn_id` names. A queued turn is withdrawn here and now, before it ever reaches the model; a
    parked turn ends here and now; a running step sees the request in the database inside the
    transaction that would move it on, so no accepted cancel is lost."""
    with rt.db.session() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        if turn_id is not None and turn_id != ws.active_turn_id:
            named = s.get(Turn, turn_id)
            if named is None or named.ws_id != ws_id or named.status != TurnStatus.QUEUED:
                # The turn the client meant has ended; the one running now is not its to stop.
                raise ConflictError(
                    f"turn {turn_id} is neither running nor queued"
                    + (f"; the running turn is {ws.active_turn_id}" if ws.active_turn_id else ""),
                    active_turn_id=ws.active_turn_id,
                )
        elif ws.active_turn_id is None:
            raise ConflictError("no turn is running", active_turn_id=None)
        else:
            named = s.get(Turn, ws.active_turn_id, with_for_update=True)
            assert named is not None
            named.cancel_requested = True
            s.add(named)
        turn_id, status, parked = named.id, named.status, named.phase in PARKED_PHASES
    if status == TurnStatus.QUEUED:
        if _withdraw(rt, ws_id, turn_id):
            return Cancelled(turn_id, ended=True)
        return cancel(rt, ws_id, by, turn_id)  # started meanwhile: cancel it as the running turn
    raise_flag(rt, turn_id)  # a running step sees this between chunks and lines
    if parked:
        _end_parked(rt, turn_id, by)
    return Cancelled(turn_id, ended=False)


@dataclass(frozen=True)
class Cancelled:
    """What a cancel did: `ended` when the turn is over already (a queued turn withdrawn); else
    the running turn was asked to stop and ends on its own (its `cancelled` event says when)."""

    turn_id: str
    ended: bool


def _withdraw(rt: Runtime, ws_id: str, turn_id: str) -> bool:
    """End the queued turn before it starts; False if it is no longer queued (it started)."""
    with ordered(rt, ws_id) as out, rt.db.session() as s:
        withdrawn = s.exec(
            update(Turn)
            .where(col(Turn.id) == turn_id, col(Turn.status) == TurnStatus.QUEUED)
            .values(status=TurnStatus.CANCELLED, phase=TurnPhase.FINISHED, ended_at=utcnow())
        )
        if withdrawn.rowcount != 1:
            return False
        # No state_change: the workstream is as it was (another turn runs, or it is idle).
        out.add(EventType.CANCELLED, turn_id=turn_id, queued=True)
    return True


def _end_parked(rt: Runtime, turn_id: str, by: str) -> None:
    """No task holds a parked turn: deny its pending calls, stop its waiting ones, end it."""
    with rt.db.session() as s:
        parked = s.get(Turn, turn_id)
    assert parked is not None
    with ordered(rt, parked.ws_id) as out, rt.db.session() as s:
        # Bump the attempt so that a late batch (approved or resumed just before) is fenced out.
        moved = s.exec(
            update(Turn)
            .where(col(Turn.id) == turn_id, col(Turn.phase).in_(PARKED_PHASES))
            .values(attempt=Turn.attempt + 1)
        )
        if moved.rowcount != 1:
            return  # decided or resumed meanwhile: the batch task will see the cancel
        turn = s.get(Turn, turn_id, populate_existing=True)
        assert turn is not None
        closed = calls.close_open(s, calls.batch(s, turn_id, turn.step), by=by)
        calls.answer(s, turn, turn.step)
        denied = [r for r in closed if r.status == CallStatus.DENIED]
        if denied:
            out.add(
                EventType.APPROVAL_RESOLVED,
                turn_id=turn_id,
                call_ids=[r.call_id for r in denied],
                approved=False,
                feedback=calls.CANCEL_FEEDBACK,
                always=False,
                by=by,
                how="cancel",
            )
        for row in closed:
            calls.announce(rt, row, out=out)
        turns.end_turn(s, out, turn, TurnStatus.CANCELLED)


def stop_children(rt: Runtime, parent_turn_id: str, by: str = "cancel") -> list[str]:
    """Cancel every child of the turn that is still working; the ids of those it stopped (one
    that ended meanwhile is not)."""
    with rt.db.reader() as s:
        running = s.exec(
            select(Workstream.id).where(
                Workstream.parent_turn_id == parent_turn_id, col(Workstream.active_turn_id).is_not(None)
            )
        ).all()
    return [child_id for child_id in running if stop_child(rt, child_id, by)]


def stop_child(rt: Runtime, child_id: str, by: str = "sweeper") -> bool:
    """Cancel one sub-agent; whether it was still working."""
    try:
        cancel(rt, child_id, by=by)
    except ConflictError:
        return False
    return True
