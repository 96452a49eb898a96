"""Polling: beat's pass claims the due watches and enqueues one poll each; a poll runs the
command under bash's rules, judges the result, and either schedules the next poll or ends the
watch and delivers its result.

A claim is a token written by a conditional UPDATE (on PostgreSQL, over rows picked with
`FOR UPDATE SKIP LOCKED`, so concurrent passes split the due watches instead of queueing on
them), and every later write is conditional on it: however many passes and workers run, one
claim polls a watch at most once. A claim whose poll never ended (its task lost, its worker
dead) lapses after the command timeout plus a grace, and the watch is claimed again; a poll that
had started then counts as one of the watch's polls, so that a command or a condition that kills
its worker every time ends the watch at `max_polls` instead of being polled for ever.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, case, func, not_, or_, update
from sqlmodel import col, select

from app.engine.publishing.outbox import ordered
from app.events import EventType
from app.runtime import Runtime
from app.sandbox.enforcement import SandboxUnavailableError
from app.storage.models import Watch, WatchStatus, Workstream, utcnow
from app.tools import bash
from app.tools.core import guard
from app.tools.core.base import ToolContext
from app.tools.core.truncation import truncate_pieces
from app.watches import delivery, store
from app.watches.conditions import ConditionError, PollResult, evaluate
from app.watches.reports import Verdict, report

WATCH_OUTPUT_CHARS = 64 * 1024  # a poll's output, as kept, compared and reported
WATCH_CLAIMS_PER_PASS = 100  # due watches one pass claims at most; the next pass takes the rest
# A claimed watch not polled (and released) within the command timeout plus this is claimed
# again: its poll task was lost, or its worker died.
WATCH_CLAIM_GRACE_SECONDS = 60.0

log = logging.getLogger(__name__)

CANCEL_CHECK_SECONDS = 1.0  # how often a running poll looks whether its watch was cancelled
LOST_POLL = "the poll did not finish: its worker stopped, or it ran past tools.timeout + 60 s"


def claim_lease_seconds(rt: Runtime) -> float:
    return rt.settings.tools.timeout + WATCH_CLAIM_GRACE_SECONDS


def run_pass(rt: Runtime) -> int:
    """Claim what is due and enqueue a poll for each; how many were enqueued."""
    claimed = claim_due(rt)
    for watch_id, token in claimed:
        rt.queue.watch_poll(watch_id, token)
    return len(claimed)


def claim_due(rt: Runtime, limit: int = WATCH_CLAIMS_PER_PASS) -> list[tuple[str, str]]:
    """(watch id, claim token) of each due watch this pass took; overdue ones are taken once.

    No more are taken than leave `[tools] watch_poll_concurrency` polls in flight: the rest
    stay due for a later pass, and approved calls always find worker threads free."""
    token = uuid.uuid4().hex
    live_claim = col(Watch.claimed_at) >= rt.db.ago(claim_lease_seconds(rt))
    due = and_(
        col(Watch.status) == WatchStatus.ACTIVE,
        col(Watch.next_poll_at) <= rt.db.now(),
        or_(col(Watch.claimed_at).is_(None), not_(live_claim)),
    )
    lost = col(Watch.poll_started_at).is_not(None)  # a poll started under a claim that lapsed
    with rt.db.session() as s:
        in_flight = s.exec(
            select(func.count()).where(col(Watch.status) == WatchStatus.ACTIVE, live_claim)
        ).one()
        limit = min(limit, rt.settings.tools.watch_poll_concurrency - in_flight)
        if limit <= 0:
            return []
        pick = select(Watch.id).where(due).order_by(col(Watch.next_poll_at)).limit(limit)
        if rt.db.is_postgresql:
            pick = pick.with_for_update(skip_locked=True)
        ids = list(s.exec(pick).all())  # SQLite: BEGIN IMMEDIATE already holds the write lock
        if not ids:
            return []
        s.exec(
            update(Watch)
            .where(col(Watch.id).in_(ids), due)
            .values(
                claim_token=token,
                claimed_at=rt.db.now(),
                poll_started_at=None,
                polls=case((lost, col(Watch.polls) + 1), else_=col(Watch.polls)),
                last_error=case((lost, LOST_POLL), else_=col(Watch.last_error)),
            )
        )
        taken = s.exec(select(Watch.id).where(col(Watch.id).in_(ids), Watch.claim_token == token)).all()
    return [(watch_id, token) for watch_id in taken]


def poll(rt: Runtime, watch_id: str, token: str) -> None:
    """One poll under the claim `token`; a repeated delivery, or a claim taken over, does nothing."""
    watch = _start(rt, watch_id, token)
    if watch is None:
        return
    with rt.db.reader() as s:
        ws = s.get(Workstream, watch.ws_id)
    if ws is None:
        return
    if watch.polls >= watch.max_polls:  # its last polls never finished: it ends without another
        _finish(rt, watch, token, *_lost(watch))
        return
    result = _run(rt, watch, ws)
    verdict = judge(watch, result)
    _finish(rt, watch, token, result, verdict)


def _start(rt: Runtime, watch_id: str, token: str) -> Watch | None:
    """Mark the claim's poll started (and renew the claim) before the command runs."""
    with rt.db.session() as s:
        moved = s.exec(
            update(Watch)
            .where(
                col(Watch.id) == watch_id,
                col(Watch.claim_token) == token,
                col(Watch.status) == WatchStatus.ACTIVE,
                col(Watch.poll_started_at).is_(None),
            )
            .values(poll_started_at=rt.db.now(), claimed_at=rt.db.now())
        )
        if moved.rowcount != 1:
            return None
        return s.get(Watch, watch_id, populate_existing=True)


def _run(rt: Runtime, watch: Watch, ws: Workstream) -> PollResult:
    if not os.path.isdir(ws.working_dir):
        return PollResult(f"Error: working directory {ws.working_dir} does not exist", -1, watch.last_output)
    ctx = ToolContext(
        ws_id=ws.id,
        working_dir=ws.working_dir,
        settings=rt.settings.tools,
        model=rt.settings.model(ws.model),  # its key is redacted from the output
        is_cancelled=_cancel_check(rt, watch.id),
        sandbox=rt.sandbox,
        network=ws.network,
    )
    timeout = rt.settings.tools.timeout
    try:
        done = bash.run(watch.command, timeout, ctx)
    except OSError as exc:  # no bash, no room for a process: a failed poll, not a lost claim
        return PollResult(f"Error: the command could not be started: {exc}", -1, watch.last_output)
    except SandboxUnavailableError as exc:  # a failed poll too: installing bwrap mends the next
        return PollResult(str(exc), -1, watch.last_output)
    # One notice, counting what bash did not keep while the command ran as well.
    text = truncate_pieces(done.pieces, WATCH_OUTPUT_CHARS)
    if done.stopped == "timeout":
        text += f"\n[timed out after {timeout} s and was stopped]"
    return PollResult(text, done.returncode, watch.last_output, tuple(sorted(ctx.redacted.items())))


def _lost(watch: Watch) -> tuple[PollResult, Verdict]:
    """What a watch whose polls ran out while the last of them was lost ends with: the last
    output a poll stored, and why there is no newer one."""
    exit_code = -1 if watch.last_exit_code is None else watch.last_exit_code
    result = PollResult(watch.last_output or "", exit_code, watch.last_output)
    return result, Verdict(fired=False, exhausted=True, polls=watch.polls, error=watch.last_error, lost=True)


def _cancel_check(rt: Runtime, watch_id: str) -> Any:
    """Whether the watch was cancelled while its command runs (asked of the database at most
    once a second; bash asks every few milliseconds)."""
    state = {"at": time.monotonic(), "cancelled": False}

    def cancelled() -> bool:
        if not state["cancelled"] and time.monotonic() - float(state["at"]) >= CANCEL_CHECK_SECONDS:
            state["at"] = time.monotonic()
            with rt.db.reader() as s:
                status = s.exec(select(Watch.status).where(Watch.id == watch_id)).first()
            state["cancelled"] = status != WatchStatus.ACTIVE
        return bool(state["cancelled"])

    return cancelled


def judge(watch: Watch, result: PollResult) -> Verdict:
    """Whether this poll fires the watch, ends it (max_polls), or lets it go on."""
    error = None
    if watch.stop_on:
        try:
            fired = evaluate(watch.stop_on, result)
        except ConditionError as exc:
            fired, error = False, str(exc)
    else:
        fired = result.changed
    polls = watch.polls + 1
    exhausted = not fired and polls >= watch.max_polls
    return Verdict(fired=fired, exhausted=exhausted, polls=polls, error=error)


def _finish(rt: Runtime, watch: Watch, token: str, result: PollResult, verdict: Verdict) -> None:
    values: dict[str, Any] = {
        "polls": verdict.polls,
        "last_output": result.output,
        "last_exit_code": result.exit_code,
        "last_polled_at": rt.db.now(),
        "last_error": verdict.error,
        "next_poll_at": rt.db.now() + timedelta(seconds=watch.poll_every),
        "claim_token": None,
        "claimed_at": None,
        "poll_started_at": None,
    }
    ends = verdict.fired or verdict.exhausted
    text = report(watch, result, verdict) if ends else None
    # A watch's output reaches the model as a message: it passes the output guard as a tool's
    # result does, with what bash's stream redacted of it counted in.
    guarded = guard.screen(text, rt.settings.tools, dict(result.redacted)) if text is not None else None
    if guarded is not None:
        text = guarded.text
    if ends:
        status = WatchStatus.FIRED if verdict.fired else WatchStatus.EXHAUSTED
        values.update(status=status, ended_at=utcnow(), result=text)
    turn_id = None
    with ordered(rt, watch.ws_id) as out, rt.db.session() as s:
        moved = s.exec(
            update(Watch)
            .where(
                col(Watch.id) == watch.id,
                col(Watch.claim_token) == token,
                col(Watch.status) == WatchStatus.ACTIVE,
            )
            .values(**values)
        )
        if moved.rowcount != 1:
            log.info("watch %s: cancelled or taken over while it polled; its result is dropped", watch.id)
            return
        if text is not None:
            turn_id = delivery.deliver(s, out, watch.ws_id, text)
        if guarded is not None and guarded.warned:
            redacted, signs = guarded.redacted, list(guarded.signs)
            out.add(EventType.OUTPUT_WARNING, watch_id=watch.id, name="watch", redacted=redacted, signs=signs)
        fresh = s.get(Watch, watch.id, populate_existing=True)
        assert fresh is not None
        out.add(EventType.WATCH, watch=store.summary(fresh))
    if turn_id is not None:
        delivery.start(rt, watch.ws_id, turn_id)
