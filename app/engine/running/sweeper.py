"""Recovery and housekeeping run by beat: re-queue steps whose worker died, resume batches
whose waits ended, start queued turns that nobody started, time out approvals, keep runs'
contracts (app/jobs/policing.py)."""

from __future__ import annotations

import contextlib
import logging

from redis.exceptions import LockError, LockNotOwnedError
from sqlalchemy import or_, update
from sqlmodel import col, select

from app.coordination import waits
from app.engine.life import calls, cancel
from app.engine.life.approvals import Decision, decide
from app.engine.life.turns import activate_next
from app.engine.subagents import fanin
from app.errors import ConflictError
from app.jobs import policing, tool_outputs
from app.runtime import Runtime
from app.schedules import firing
from app.storage.models import Turn, TurnPhase, TurnStatus, Workstream
from app.tools.commands import background
from app.webhooks import emitting

log = logging.getLogger(__name__)

SWEEP_LOCK = "tj:lock:sweep"
SWEEP_LOCK_SECONDS = 30.0  # at least; renewed before each part of a pass


def sweep(rt: Runtime) -> int:
    """One pass; the number of steps re-queued. Passes never overlap (a Redis lock, renewed
    before each part, so that a long pass keeps it; one that lost it anyway stops there)."""
    lock = rt.redis.lock(SWEEP_LOCK, timeout=max(SWEEP_LOCK_SECONDS, rt.settings.sweep_interval_seconds * 3))
    if not lock.acquire(blocking=False):
        return 0
    requeued = 0
    try:
        requeued = requeue_stale(rt)
        # fanin before resuming: a delivered answer may be a batch's last wait
        # a coordinator's waits settled (a child ended, or the time is up) before resuming too
        parts = (
            _fan_in,
            waits.sweep,
            tool_outputs.expire,  # a client tool's wait past its limit: an error result, then resumed
            resume_finished_waits,
            start_orphaned_turns,
            time_out_approvals,
            _lost_shells,
            policing.sweep,
            emitting.sweep,
            firing.sweep,
        )
        for part in parts:
            lock.reacquire()  # LockNotOwnedError: another pass has it now; this one stops
            part(rt)
        return requeued
    except LockNotOwnedError:
        log.warning("sweep pass outlasted its lock and another began; this one stopped")
        return requeued
    finally:
        with contextlib.suppress(LockNotOwnedError, LockError):  # never hides the pass's own error
            lock.release()


def _lost_shells(rt: Runtime) -> int:
    """Background shells whose worker died are reported lost (their output kept)."""
    return background.reconcile(rt.db)


def _fan_in(rt: Runtime) -> int:
    return fanin.sweep(rt, stop=cancel.stop_child)


def requeue_stale(rt: Runtime) -> int:
    """Send again the steps whose worker stopped beating or whose task was lost on its way.

    Each is re-sent once per stale period, not on every sweep: the re-send releases the
    dead claim and restarts the clock that the next look compares against. Every time is
    the database's clock (`rt.db.now()`), so machines whose clocks differ agree."""
    stale = rt.db.ago(rt.settings.stale_after_seconds)
    with rt.db.session() as s:
        turns = s.exec(
            select(Turn).where(
                Turn.status == TurnStatus.ACTIVE,
                col(Turn.phase).in_([TurnPhase.MODEL, TurnPhase.TOOLS]),
                or_(
                    col(Turn.heartbeat_at) < stale,  # its worker stopped beating
                    (col(Turn.heartbeat_at).is_(None)) & (col(Turn.enqueued_at) < stale),  # lost on its way
                ),
            )
        ).all()
    count = 0
    for turn in turns:
        with rt.db.session() as s:
            moved = s.exec(
                update(Turn)
                .where(
                    col(Turn.id) == turn.id,
                    col(Turn.phase) == turn.phase,
                    col(Turn.step) == turn.step,
                    col(Turn.attempt) == turn.attempt,
                    or_(col(Turn.heartbeat_at) < stale, col(Turn.heartbeat_at).is_(None)),
                )
                .values(enqueued_at=rt.db.now(), heartbeat_at=None)
            )
        if moved.rowcount != 1:
            continue
        log.warning("turn %s: re-queueing its %s step %s (no live worker)", turn.id, turn.phase, turn.step)
        if turn.phase == TurnPhase.MODEL:
            rt.queue.model_step(turn.id, turn.step)
        else:
            rt.queue.tool_batch(turn.id, turn.step)
        count += 1
    return count


def resume_finished_waits(rt: Runtime) -> int:
    """Hand on batches parked `awaiting` whose waiting calls have all ended (a finisher that
    died between its two steps, or a call ended by another path)."""
    with rt.db.session() as s:
        parked = s.exec(
            select(Turn).where(Turn.status == TurnStatus.ACTIVE, Turn.phase == TurnPhase.AWAITING)
        ).all()
    resumed = 0
    for turn in parked:
        with rt.db.session() as s:
            if calls.has_waiting(s, turn.id, turn.step) or not calls.resume(rt, s, turn.id):
                continue
        log.warning("turn %s: resuming its batch, whose waiting calls have all ended", turn.id)
        rt.queue.tool_batch(turn.id, turn.step)
        resumed += 1
    return resumed


def start_orphaned_turns(rt: Runtime) -> int:
    """Start queued turns of workstreams with no active turn: a process that ended a turn (or
    stored a message) and died before starting the next leaves them so. The number started."""
    with rt.db.session() as s:
        ws_ids = s.exec(
            select(Turn.ws_id)
            .join(Workstream, col(Workstream.id) == col(Turn.ws_id))
            .where(Turn.status == TurnStatus.QUEUED, col(Workstream.active_turn_id).is_(None))
            .distinct()
        ).all()
    started = 0
    for ws_id in ws_ids:
        turn_id = activate_next(rt, ws_id)  # a conditional update: safe beside a concurrent send
        if turn_id is not None:
            log.warning("workstream %s: starting queued turn %s that nobody started", ws_id, turn_id)
            started += 1
    return started


def time_out_approvals(rt: Runtime) -> None:
    limit = rt.settings.tools.approval_timeout_seconds
    if limit <= 0:
        return
    cutoff = rt.db.ago(limit)
    with rt.db.session() as s:
        parked = s.exec(
            select(Turn).where(
                Turn.status == TurnStatus.ACTIVE,
                Turn.phase == TurnPhase.APPROVAL,
                col(Turn.phase_started_at) < cutoff,
            )
        ).all()
    for turn in parked:
        try:
            decide(
                rt,
                turn.ws_id,
                Decision(
                    approved=False,
                    feedback=f"Approval timed out after {limit} s",
                    by="timeout",
                    how="timeout",
                ),
            )
        except ConflictError:
            continue  # someone decided meanwhile
