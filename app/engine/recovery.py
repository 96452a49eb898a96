"""Ending a turn that a bug broke, so that its workstream takes the next message."""

from __future__ import annotations

from app.engine import turns
from app.events import EventType
from app.runtime import Runtime
from app.storage.models import Turn, TurnStatus


def fail_turn(rt: Runtime, turn_id: str, message: str) -> None:
    with rt.db.session() as s:
        turn = s.get(Turn, turn_id, with_for_update=True)
        if turn is None or turn.status != TurnStatus.ACTIVE:
            return
        turn.attempt += 1  # whatever attempt was running is fenced out
        state = turns.end_turn(rt, s, turn, TurnStatus.ERROR, error=message)
    rt.events.publish(turn.ws_id, EventType.ERROR, turn_id=turn_id, message=message)
    turns.announce_end(rt, turn, state, None)
