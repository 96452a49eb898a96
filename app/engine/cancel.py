"""Cancel: stop the running turn wherever it stands; the workstream takes the next message."""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import col

from app.engine import calls as call_store
from app.engine import turns
from app.engine.cancellation import raise_flag
from app.errors import ConflictError, NotFoundError
from app.events import EventType
from app.runtime import Runtime
from app.storage.models import CallStatus, Message, Turn, TurnPhase, TurnStatus, Workstream, utcnow

CANCEL_FEEDBACK = "Cancelled by user"


def cancel(rt: Runtime, ws_id: str, by: str = "user", turn_id: str | None = None) -> str:
    """Request the cancel of the active turn (only if it is `turn_id`, when given); its id.
    A parked turn ends here and now."""
    with rt.db.session() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        if ws.active_turn_id is None:
            raise ConflictError("no turn is running", active_turn_id=None)
        if turn_id is not None and turn_id != ws.active_turn_id:
            # The turn the client meant has ended; the one running now is not its to stop.
            raise ConflictError(
                f"turn {turn_id} is not running; the running turn is {ws.active_turn_id}",
                active_turn_id=ws.active_turn_id,
            )
        turn = s.get(Turn, ws.active_turn_id, with_for_update=True)
        assert turn is not None
        turn.cancel_requested = True
        s.add(turn)
        turn_id, parked = turn.id, turn.phase == TurnPhase.APPROVAL
    raise_flag(rt, turn_id)  # a running step sees this between chunks and lines
    if parked:
        _end_parked(rt, turn_id, by)
    return turn_id


def _end_parked(rt: Runtime, turn_id: str, by: str) -> None:
    """No task holds a parked turn: deny its pending calls and end it from here."""
    with rt.db.session() as s:
        # Bump the attempt so that a late batch (approved just before) is fenced out.
        moved = s.exec(
            update(Turn)
            .where(col(Turn.id) == turn_id, col(Turn.phase) == TurnPhase.APPROVAL)
            .values(attempt=Turn.attempt + 1)
        )
        if moved.rowcount != 1:
            return  # decided meanwhile: the batch task will see the cancel flag
        turn = s.get(Turn, turn_id, populate_existing=True)
        assert turn is not None
        denied = []
        for row in call_store.batch(s, turn_id, turn.step):
            if row.status in (CallStatus.PENDING, CallStatus.APPROVED):
                row.status = CallStatus.DENIED if row.status == CallStatus.PENDING else CallStatus.CANCELLED
                row.output = (
                    call_store.denial_text(CANCEL_FEEDBACK)
                    if row.status == CallStatus.DENIED
                    else call_store.CANCELLED_OUTPUT
                )
                row.is_error = True
                row.decided_by, row.decided_how = by, "cancel"
                row.finished_at = utcnow()
                s.add(row)
                denied.append(row)
            s.add(
                Message(
                    ws_id=turn.ws_id,
                    turn_id=turn_id,
                    role="tool",
                    tool_call_id=row.call_id,
                    name=row.func_name,
                    content=row.output or "",
                    is_error=row.is_error,
                )
            )
        state = turns.end_turn(rt, s, turn, TurnStatus.CANCELLED)
    rt.events.publish(
        turn.ws_id,
        EventType.APPROVAL_RESOLVED,
        turn_id=turn_id,
        call_ids=[r.call_id for r in denied],
        approved=False,
        feedback=CANCEL_FEEDBACK,
        always=False,
        by=by,
        how="cancel",
    )
    for row in denied:
        rt.events.publish(
            turn.ws_id,
            EventType.TOOL_RESULT,
            turn_id=turn_id,
            call_id=row.call_id,
            name=row.func_name,
            output=row.output,
            is_error=True,
        )
    turns.announce_end(rt, turn, state, None)
