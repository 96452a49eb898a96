"""Claims and fencing: which attempt of a turn may run its current phase and write.

A task claims a turn's phase by bumping `attempt`; the claim succeeds only when
no other attempt holds a fresh heartbeat. Every later write re-checks the
attempt inside its own transaction, so a stale worker's writes are refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import or_, update
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, col

from app.engine.cancellation import CancelCheck
from app.errors import StaleAttemptError
from app.events import Fence
from app.runtime import Runtime
from app.storage.models import Turn, TurnStatus, utcnow

log = logging.getLogger(__name__)


def run_phase(
    rt: Runtime, turn_id: str, phase: str, step: int, body: Callable[[Fence, CancelCheck], None]
) -> None:
    """Claim the phase, keep the claim alive while `body` runs, stop quietly once superseded."""
    fence = claim(rt, turn_id, phase, step)
    if fence is None:
        return  # already done, or held by a live attempt: a duplicate delivery
    try:
        with Heartbeat(rt, fence) as heartbeat:
            body(fence, CancelCheck(rt, turn_id, heartbeat))
    except StaleAttemptError:
        log.warning("turn %s: attempt %s was superseded; stopping", turn_id, fence.attempt)


def claim(rt: Runtime, turn_id: str, phase: str, step: int) -> Fence | None:
    """Take the turn's `phase` at `step` for this task; None when that is not ours to run."""
    now = utcnow()
    stale = now - timedelta(seconds=rt.settings.stale_after_seconds)
    with rt.db.session() as s:
        result = s.exec(
            update(Turn)
            .where(
                col(Turn.id) == turn_id,
                col(Turn.status) == TurnStatus.ACTIVE,
                col(Turn.phase) == phase,
                col(Turn.step) == step,
                or_(col(Turn.heartbeat_at).is_(None), col(Turn.heartbeat_at) < stale),
            )
            .values(
                attempt=Turn.attempt + 1,
                step_claims=Turn.step_claims + 1,
                heartbeat_at=now,
            )
        )
        if result.rowcount != 1:
            return None
        turn = s.get(Turn, turn_id)
        assert turn is not None
        fence = Fence(turn_id, turn.attempt)
    rt.events.set_fence(fence)
    return fence


def beat(s: Session, fence: Fence) -> bool:
    """Refresh the claim's heartbeat; False once it is gone (superseded, or released by the
    phase's end: a beat after that must not look like a live claim to the next phase's task)."""
    result = s.exec(
        update(Turn)
        .where(
            col(Turn.id) == fence.turn_id,
            col(Turn.attempt) == fence.attempt,
            col(Turn.heartbeat_at).is_not(None),
        )
        .values(heartbeat_at=utcnow())
    )
    return bool(result.rowcount == 1)


def check(s: Session, fence: Fence) -> Turn:
    """Inside a write transaction: the turn, locked, or StaleAttemptError."""
    result = s.exec(
        update(Turn)
        .where(col(Turn.id) == fence.turn_id, col(Turn.attempt) == fence.attempt)
        .values(heartbeat_at=utcnow())
    )
    if result.rowcount != 1:
        raise StaleAttemptError(fence.turn_id)
    turn = s.get(Turn, fence.turn_id, populate_existing=True)
    assert turn is not None
    return turn


@contextmanager
def fenced(rt: Runtime, fence: Fence) -> Iterator[tuple[Session, Turn]]:
    with rt.db.session() as s:
        yield s, check(s, fence)


class Heartbeat:
    """Keeps a claim fresh while a task runs; notices when it has been superseded."""

    def __init__(self, rt: Runtime, fence: Fence) -> None:
        self._rt = rt
        self._fence = fence
        self._stop = threading.Event()
        self.superseded = False
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{fence.turn_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._rt.settings.heartbeat_seconds):
            try:
                with self._rt.db.session() as s:
                    alive = beat(s, self._fence)
                if not alive:
                    self.superseded = True
                    return
            except DBAPIError:  # the database blinked: the next tick tries again
                continue
