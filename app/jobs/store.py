"""Runs stored and found: one is made with its workstream (given, or a new one) and its turn;
listings show a caller's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from app.engine.life import turns, workstreams
from app.engine.publishing.outbox import Defer
from app.errors import NotFoundError, UnprocessableError
from app.jobs import status
from app.jobs.contract import Policy
from app.runtime import Runtime
from app.storage.models import Run, utcnow
from app.users import ownership
from app.users.principal import Principal

MAX_LISTED = 200  # runs a listing shows at most
LIST_SCAN = 2000  # runs a listing reads at most to find those of the status asked


@dataclass(frozen=True)
class Asked:
    """A run as its caller asked for it (the fields checked already)."""

    prompt: str
    ws_id: str | None
    model: str | None
    policy: Policy
    timeout_s: int | None
    metadata: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)  # checked (app/tools/client_tools.py)
    webhook_id: str | None = None  # one of the caller's endpoints, checked


def create(
    rt: Runtime, who: Principal, asked: Asked, defer: Defer | None = None, run_id: str | None = None
) -> tuple[Run, turns.Sent]:
    """The run stored, then its turn sent (with the run's key, so that the turn is found again
    if this request stops between the two), then the turn's id written on the run. With
    `run_id` (a schedule's firing decides it), a run stored already under it is sent, not
    stored again: a firing retried after a crash starts one run."""
    turns.check_size(rt, asked.prompt)
    run_id = run_id or turns.new_id()
    with rt.db.reader() as s:
        earlier = s.get(Run, run_id)
    if earlier is not None:
        return _send(rt, earlier, asked.prompt, defer)
    ws_id = _workstream(rt, who, asked, run_id)
    now = utcnow()
    run = Run(
        id=run_id,
        ws_id=ws_id,
        owner_id=workstreams.get(rt, ws_id).owner_id,
        policy=asked.policy.as_dict(),
        run_metadata=asked.metadata,
        timeout_s=asked.timeout_s,
        deadline_at=now + timedelta(seconds=asked.timeout_s) if asked.timeout_s else None,
        created_by=who.name,
        created_at=now,
        tools=asked.tools,
        webhook_id=asked.webhook_id,
    )
    with rt.db.session() as s:
        s.add(run)
    return _send(rt, run, asked.prompt, defer)


def _send(rt: Runtime, run: Run, prompt: str, defer: Defer | None) -> tuple[Run, turns.Sent]:
    sent = turns.send(rt, run.ws_id, prompt, idempotency_key=status.sent_key(run.id), defer=defer)
    with rt.db.session() as s:
        s.exec(update(Run).where(col(Run.id) == run.id).values(turn_id=sent.id))
    run.turn_id = sent.id
    return run, sent


def _workstream(rt: Runtime, who: Principal, asked: Asked, run_id: str) -> str:
    if asked.ws_id is None:
        ws = workstreams.create(
            rt,
            name=f"run {run_id[:6]}",
            model=asked.model,
            owner_id=ownership.owner_for_new(who),
            is_admin=who.is_operator or who.is_admin,
        )
        return ws.id
    if asked.model is not None:
        raise UnprocessableError("model: a run in an existing workstream uses its model", field="model")
    ownership.require_workstream(rt, who, asked.ws_id)
    return asked.ws_id


def get(rt: Runtime, run_id: str) -> Run:
    with rt.db.reader() as s:
        run = s.get(Run, run_id)
    if run is None:
        raise NotFoundError(f"no run {run_id}")
    return run


def describe(rt: Runtime, run_id: str) -> dict[str, Any]:
    with rt.db.reader() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise NotFoundError(f"no run {run_id}")
        return status.read(s, run)


def current(rt: Runtime, run: Run) -> status.RunStatus:
    with rt.db.reader() as s:
        return status.now_of(s, run)


def listing(
    rt: Runtime, who: Principal, state: status.RunStatus | None, since: datetime | None, limit: int
) -> list[dict[str, Any]]:
    """The caller's runs (an admin's: all), newest first, of `state` and made since `since`."""
    query = select(Run).order_by(col(Run.created_at).desc(), col(Run.id).desc()).limit(LIST_SCAN)
    if not who.is_admin:
        query = query.where(col(Run.owner_id) == who.user_id) if who.user_id else query.where(False)
    if since is not None:
        query = query.where(col(Run.created_at) >= since)
    shown: list[dict[str, Any]] = []
    with rt.db.reader() as s:
        for run in s.exec(query).all():
            now = status.now_of(s, run)
            if state is None or now == state:
                shown.append(status.summary(run, now))
            if len(shown) >= min(limit, MAX_LISTED):
                break
    return shown
