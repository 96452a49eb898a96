"""Turns: opening one per message, one active per workstream, the rest queued behind it."""

from __future__ import annotations

import uuid

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.errors import NotFoundError, PayloadTooLargeError
from app.events import EventType, Fence
from app.runtime import Runtime
from app.storage.models import (
    Message,
    Turn,
    TurnPhase,
    TurnStatus,
    Workstream,
    WorkstreamState,
    utcnow,
)


def new_id() -> str:
    return uuid.uuid4().hex


def send(
    rt: Runtime, ws_id: str, message: str, origin: str = "user", idempotency_key: str | None = None
) -> Turn:
    """Store the message as a turn; start it now or queue it behind the active one.

    With an `idempotency_key`, a send repeated with the same key (a client's retry
    after a lost response) returns the turn the first one stored, and stores nothing.
    """
    if len(message.encode()) > rt.settings.max_message_bytes:
        raise PayloadTooLargeError(
            f"message is {len(message.encode())} bytes; the limit is {rt.settings.max_message_bytes}"
        )
    if idempotency_key is not None and (earlier := _turn_for_key(rt, ws_id, idempotency_key)):
        return earlier
    try:
        with rt.db.session() as s:
            if s.get(Workstream, ws_id) is None:
                raise NotFoundError(f"no workstream {ws_id}")
            turn = Turn(
                id=new_id(), ws_id=ws_id, message=message, origin=origin, idempotency_key=idempotency_key
            )
            s.add(turn)
    except IntegrityError:
        # The same key raced in from a second request: the one stored first is the answer.
        if idempotency_key is None or (earlier := _turn_for_key(rt, ws_id, idempotency_key)) is None:
            raise
        return earlier
    activate_next(rt, ws_id)
    with rt.db.session() as s:
        stored = s.get(Turn, turn.id)
    assert stored is not None
    if stored.status == TurnStatus.QUEUED:
        rt.events.publish(ws_id, EventType.TURN_QUEUED, turn_id=stored.id, message=message)
    return stored


def _turn_for_key(rt: Runtime, ws_id: str, key: str) -> Turn | None:
    with rt.db.session() as s:
        return s.exec(select(Turn).where(Turn.ws_id == ws_id, Turn.idempotency_key == key)).first()


def activate_next(rt: Runtime, ws_id: str) -> str | None:
    """Start the oldest queued turn when no turn is active; the started turn's id."""
    with rt.db.session() as s:
        turn = s.exec(
            select(Turn)
            .where(Turn.ws_id == ws_id, Turn.status == TurnStatus.QUEUED)
            .order_by(col(Turn.created_at), col(Turn.id))
            .limit(1)
        ).first()
        if turn is None:
            return None
        taken = s.exec(
            update(Workstream)
            .where(col(Workstream.id) == ws_id, col(Workstream.active_turn_id).is_(None))
            .values(active_turn_id=turn.id, state=WorkstreamState.THINKING, updated_at=utcnow())
        )
        if taken.rowcount != 1:
            return None  # another turn is active; this one starts when it ends
        now = utcnow()
        turn.status = TurnStatus.ACTIVE
        turn.phase = TurnPhase.MODEL
        turn.started_at = now
        turn.enqueued_at = now
        s.add(turn)
        s.add(Message(ws_id=ws_id, turn_id=turn.id, role="user", content=turn.message))
        turn_id = turn.id
    rt.events.publish(ws_id, EventType.MESSAGE, turn_id=turn_id, role="user", content=turn.message)
    rt.events.publish(ws_id, EventType.STATE_CHANGE, turn_id=turn_id, state=WorkstreamState.THINKING)
    rt.queue.model_step(turn_id, 0)
    return turn_id


def end_turn(
    rt: Runtime,
    s: Session,
    turn: Turn,
    status: TurnStatus,
    error: str | None = None,
) -> WorkstreamState:
    """Inside the caller's (fenced) transaction: close the turn and free the workstream."""
    turn.status = status
    turn.phase = TurnPhase.FINISHED
    turn.ended_at = utcnow()
    turn.heartbeat_at = None
    turn.error = error
    s.add(turn)
    state = WorkstreamState.ERROR if status == TurnStatus.ERROR else WorkstreamState.IDLE
    s.exec(
        update(Workstream)
        .where(col(Workstream.id) == turn.ws_id, col(Workstream.active_turn_id) == turn.id)
        .values(active_turn_id=None, state=state, updated_at=utcnow())
    )
    return state


def announce_end(rt: Runtime, turn: Turn, state: WorkstreamState, fence: Fence | None) -> None:
    """After the end committed: tell clients, then start whatever was queued."""
    if turn.status == TurnStatus.CANCELLED:
        rt.events.publish(turn.ws_id, EventType.CANCELLED, turn_id=turn.id, fence=fence)
    rt.events.publish(turn.ws_id, EventType.STATE_CHANGE, turn_id=turn.id, state=state, fence=fence)
    activate_next(rt, turn.ws_id)


def set_state(s: Session, ws_id: str, state: WorkstreamState) -> None:
    s.exec(update(Workstream).where(col(Workstream.id) == ws_id).values(state=state, updated_at=utcnow()))
