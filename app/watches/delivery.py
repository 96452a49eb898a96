"""A watch's result reaching the model: a user message marked as the watch's, which starts a turn
(queued behind a running one), unless the depth guard holds it back."""

from __future__ import annotations

from sqlmodel import Session, col, select

from app.engine.life import turns
from app.engine.publishing.outbox import Outbox
from app.events import EventType
from app.runtime import Runtime
from app.storage.models import Message, Turn, TurnStatus

WATCH_MAX_CHAIN = 5  # watch-started turns in a row without a person's message; past it, no turn

ORIGIN = "watch"  # Turn.origin and Message.origin of what a watch wrote


def chain_length(s: Session, ws_id: str) -> int:
    """How many of the workstream's latest turns were started by watches, back to a person's."""
    origins = s.exec(
        select(Turn.origin)
        .where(Turn.ws_id == ws_id)
        .order_by(col(Turn.created_at).desc(), col(Turn.id).desc())
        .limit(WATCH_MAX_CHAIN + 1)
    ).all()
    count = 0
    for origin in origins:
        if origin != ORIGIN:
            break
        count += 1
    return count


def deliver(s: Session, out: Outbox, ws_id: str, text: str) -> str | None:
    """Inside the transaction that ends the watch: a queued turn carrying `text` (its id), or,
    past the depth guard, the message alone, stored and shown but starting nothing (None)."""
    if chain_length(s, ws_id) >= WATCH_MAX_CHAIN:
        s.add(Message(ws_id=ws_id, turn_id=None, role="user", content=text, origin=ORIGIN))
        out.add(EventType.MESSAGE, role="user", content=text, origin=ORIGIN, held=True)
        return None
    turn = Turn(id=turns.new_id(), ws_id=ws_id, message=text, origin=ORIGIN)
    s.add(turn)
    return turn.id


def start(rt: Runtime, ws_id: str, turn_id: str) -> None:
    """Once the turn is stored: start it now if the workstream is idle, else say it is queued.
    (Should this process die first, the sweeper starts it.)"""
    turns.activate_next(rt, ws_id)
    with rt.db.reader() as s:
        turn = s.get(Turn, turn_id)
    if turn is not None and turn.status == TurnStatus.QUEUED:
        rt.events.publish(ws_id, EventType.TURN_QUEUED, turn_id=turn_id, message=turn.message, origin=ORIGIN)
