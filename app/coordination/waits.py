"""A coordinator's waits: a `wait_for_workstream` call ends `waiting` (no worker holds it) and is
finished here once its children have ended their turns (all, or any) or its timeout has passed.

Nothing but the call itself is stored: its arguments name the children, the mode and the
timeout, its start time starts the clock. A child's turn end settles its parent's waits once
committed (`settle_after`); beat's sweep (`sweep`) settles the rest: timeouts, and any end whose
settling a crash cut short. Finishing is a conditional transition (`calls.finish_waiting`), so a
repeat changes nothing.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

from sqlmodel import Session, col, select

from app.coordination import answers
from app.engine.life import calls
from app.engine.publishing.outbox import Outbox
from app.engine.subagents.fanin import PASSING_FAULTS
from app.runtime import Runtime
from app.storage.models import CallStatus, ToolCall, Workstream, utcnow
from app.tools.core.tool import INTERACTIVE

log = logging.getLogger(__name__)

TOOL = "wait_for_workstream"
ALL = "all"
ANY = "any"
MODES = (ALL, ANY)
OPEN = [CallStatus.WAITING, CallStatus.RUNNING]  # RUNNING: its batch has not recorded the wait yet


def report(s: Session, coordinator_id: str, ws_ids: list[str], mode: str, timed_out: bool = False) -> dict:
    """Where the children named (none named: every open child) stand: `done` when the wait is
    over (all at rest, or any)."""
    query = select(Workstream).where(Workstream.parent_id == coordinator_id, Workstream.kind == INTERACTIVE)
    if ws_ids:
        query = query.where(col(Workstream.id).in_(ws_ids))
    else:
        query = query.where(col(Workstream.closed_at).is_(None))
    rows = s.exec(query.order_by(col(Workstream.created_at))).all()
    found = {ws.id: ws for ws in rows}
    children = [answers.described(s, found[i]) for i in (ws_ids or found) if i in found]
    finished = [c["ws_id"] for c in children if not c["is_working"]]
    working = [c["ws_id"] for c in children if c["is_working"]]
    done = bool(finished) if mode == ANY else not working
    return {
        "done": done,
        "timed_out": timed_out and not done,
        "mode": mode,
        "finished": finished,
        "still_working": working,
        "workstreams": children,
    }


def settle_after(out: Outbox, coordinator_id: str) -> None:
    """Once the end of a child's turn is committed, its coordinator's waits are looked at."""
    out.after(lambda rt: _quietly(rt, coordinator_id))


def _quietly(rt: Runtime, coordinator_id: str) -> None:
    try:
        settle(rt, coordinator_id)
    except PASSING_FAULTS as exc:  # stored already: the sweep finishes the wait
        log.warning("settling the waits of %s: %s; the sweeper will", coordinator_id, type(exc).__name__)


def settle(rt: Runtime, coordinator_id: str | None = None) -> int:
    """Finish the open waits (of one coordinator, or all) whose children have ended or whose
    time is up; the number finished."""
    query = select(ToolCall).where(ToolCall.func_name == TOOL, col(ToolCall.status).in_(OPEN))
    if coordinator_id is not None:
        query = query.where(ToolCall.ws_id == coordinator_id)
    with rt.db.reader() as s:
        rows = s.exec(query).all()
    return sum(_settle_one(rt, row) for row in rows)


def sweep(rt: Runtime) -> int:
    return settle(rt)


def _settle_one(rt: Runtime, row: ToolCall) -> bool:
    args = row.args or {}
    ws_ids, mode = list(args.get("ws_ids") or []), args.get("mode", ALL)
    timed_out = _is_past(row.started_at, float(args.get("timeout") or 0))
    with rt.db.reader() as s:
        found = report(s, row.ws_id, ws_ids, mode, timed_out)
    if not (found["done"] or timed_out):
        return False
    return calls.finish_waiting(rt, row.turn_id, row.call_id, json.dumps(found, indent=1))


def _is_past(started_at: datetime | None, timeout: float) -> bool:
    if started_at is None or timeout <= 0:
        return False
    started = started_at if started_at.tzinfo else started_at.replace(tzinfo=UTC)
    return utcnow() >= started + timedelta(seconds=timeout)
