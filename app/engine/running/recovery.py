"""Ending a turn that a bug broke: every call it asked for is answered (so the conversation
stays one a provider accepts) and its workstream takes the next message."""

from __future__ import annotations

import logging

import redis
from sqlalchemy import exc as sa_exc

from app.engine.life import calls, turns
from app.engine.publishing.outbox import ordered
from app.engine.running.leases import fenced
from app.errors import StaleAttemptError
from app.events import Fence
from app.runtime import Runtime
from app.storage.models import Turn, TurnStatus

log = logging.getLogger(__name__)

# Faults that pass: a lost connection, a busy or restarting server. A step that meets one is
# run again later; anything else (a bug, a value the database refuses) fails the turn.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, TRANSIENT_ERRORS)


def fail_turn(rt: Runtime, fence: Fence, message: str) -> None:
    """End the turn with an error, if `fence` still holds it; a newer attempt is left alone."""
    with rt.db.session() as s:
        known = s.get(Turn, fence.turn_id)
    if known is None:
        return
    try:
        with ordered(rt, known.ws_id) as out, fenced(rt, fence) as (s, turn):
            if turn.status != TurnStatus.ACTIVE:
                return
            for row in calls.close_open(s, calls.batch(s, turn.id, turn.step), by="error", failure=message):
                calls.announce(rt, row, fence, out)
            calls.answer(s, turn, turn.step)
            turns.end_turn(s, out, turn, TurnStatus.ERROR, error=message, fence=fence)
    except StaleAttemptError:
        log.warning("turn %s: not failing it, a newer attempt holds it", fence.turn_id)
