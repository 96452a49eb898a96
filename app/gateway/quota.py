"""A turn's notification slots: at most NOTIFY_MAX_PER_TURN successful notifications per turn.

A slot is a row (turn, slot number) taken before the gateway is asked, marked sent (`sent_at`)
when the notification went out and deleted when every attempt failed. The unique
(turn_id, slot) settles parallel calls of one batch, so no more than the limit can ever be sent,
and the rows outlive any worker, so a restarted worker counts what was sent before it.

A call that finds every slot taken while some are still being sent waits for those to settle
before it decides: it is refused because the turn really sent its notifications, or, when a
send outlived the longest a send can take (its worker stopped), it says that outcome is unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, func, select

from app.settings import NOTIFY_MAX_PER_TURN, NOTIFY_SETTLE_POLL_SECONDS
from app.storage.database import Database
from app.storage.models import Notification, utcnow


@dataclass(frozen=True)
class Full:
    """Every slot of the turn is taken: `sent` went out, `unsettled` did not finish in time."""

    sent: int
    unsettled: int


def take(
    db: Database,
    turn_id: str,
    call_id: str | None,
    settle_seconds: float = 0.0,
    is_cancelled: Callable[[], bool] = lambda: False,
    limit: int = NOTIFY_MAX_PER_TURN,
) -> int | Full:
    """A free slot's number, now this call's; or, once no slot is being sent any more (or
    `settle_seconds` have passed, or the call was cancelled), what filled them all."""
    deadline = time.monotonic() + settle_seconds
    while True:
        with db.reader() as s:
            rows = s.exec(
                select(Notification.slot, Notification.sent_at, Notification.created_at).where(
                    Notification.turn_id == turn_id
                )
            ).all()
        free = [n for n in range(1, limit + 1) if n not in {slot for slot, _, _ in rows}]
        if free:
            try:
                with db.session() as s:
                    s.add(Notification(turn_id=turn_id, slot=free[0], call_id=call_id))
                return free[0]
            except IntegrityError:
                continue  # a parallel call took that one: look again
        sending = [taken for _, sent_at, taken in rows if sent_at is None]
        recent = utcnow() - timedelta(seconds=settle_seconds)
        waiting = [taken for taken in sending if _aware(taken) > recent]  # older: its worker stopped
        if not waiting or time.monotonic() >= deadline or is_cancelled():
            return Full(sent=len(rows) - len(sending), unsettled=len(sending))
        time.sleep(NOTIFY_SETTLE_POLL_SECONDS)


def confirm(db: Database, turn_id: str, slot: int) -> None:
    """The slot's notification went out: it counts for good."""
    with db.session() as s:
        s.exec(
            update(Notification)
            .where(
                col(Notification.turn_id) == turn_id,
                col(Notification.slot) == slot,
                col(Notification.sent_at).is_(None),
            )
            .values(sent_at=utcnow())
        )


def give_back(db: Database, turn_id: str, slot: int) -> None:
    """Every attempt failed: the slot is free for another call."""
    with db.session() as s:
        s.exec(
            delete(Notification).where(
                col(Notification.turn_id) == turn_id,
                col(Notification.slot) == slot,
                col(Notification.sent_at).is_(None),
            )
        )


def sent(db: Database, turn_id: str) -> int:
    """How many notifications the turn has sent."""
    with db.reader() as s:
        return int(
            s.exec(
                select(func.count())
                .select_from(Notification)
                .where(Notification.turn_id == turn_id, col(Notification.sent_at).is_not(None))
            ).one()
        )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite's are UTC
