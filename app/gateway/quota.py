"""A turn's notification slots: at most NOTIFY_MAX_PER_TURN successful notifications per turn.

A slot is a row (turn, slot number) taken before the gateway is asked and given back when every
attempt failed; the unique (turn_id, slot) settles parallel calls of one batch, and the rows
outlive any worker, so a restarted worker counts what was sent before it.
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, select

from app.settings import NOTIFY_MAX_PER_TURN
from app.storage.database import Database
from app.storage.models import Notification


def take(db: Database, turn_id: str, call_id: str | None, limit: int = NOTIFY_MAX_PER_TURN) -> int | None:
    """A free slot's number, now this call's; None when the turn has used them all."""
    while True:
        with db.reader() as s:
            used = set(s.exec(select(Notification.slot).where(Notification.turn_id == turn_id)).all())
        free = [n for n in range(1, limit + 1) if n not in used]
        if not free:
            return None
        try:
            with db.session() as s:
                s.add(Notification(turn_id=turn_id, slot=free[0], call_id=call_id))
            return free[0]
        except IntegrityError:
            continue  # a parallel call took that one: look again


def give_back(db: Database, turn_id: str, slot: int) -> None:
    with db.session() as s:
        s.exec(
            delete(Notification).where(col(Notification.turn_id) == turn_id, col(Notification.slot) == slot)
        )


def used(db: Database, turn_id: str) -> int:
    with db.reader() as s:
        return len(s.exec(select(Notification.slot).where(Notification.turn_id == turn_id)).all())
