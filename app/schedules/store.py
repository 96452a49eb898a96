"""Schedules stored, shown, paused, resumed and removed; another user's is not found."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete
from sqlmodel import col, select

from app.engine.life.turns import check_size, new_id
from app.errors import ConflictError, NotFoundError, UnprocessableError
from app.jobs.contract import Policy
from app.jobs.status import aware
from app.runtime import Runtime
from app.schedules import timing
from app.storage.models import Schedule, ScheduleFiring, utcnow
from app.users import ownership
from app.users.principal import Principal

MAX_SCHEDULES_PER_OWNER = 50
SHOWN_FIRINGS = 20


@dataclass(frozen=True)
class Asked:
    cron: str | None
    every_s: int | None
    timezone: str
    prompt: str
    ws_id: str | None
    policy: Policy
    timeout_s: int | None
    webhook_id: str | None = None  # one of the owner's endpoints: every event of its runs


def create(rt: Runtime, who: Principal, asked: Asked) -> Schedule:
    check_size(rt, asked.prompt)
    timing.zone(asked.timezone)
    if asked.ws_id is not None:
        ownership.require_workstream(rt, who, asked.ws_id)
    try:
        first = timing.next_after(asked.cron, asked.every_s, asked.timezone, datetime.now(UTC))
    except timing.TimingError as exc:
        raise UnprocessableError(str(exc), field="cron") from None
    schedule = Schedule(
        id=new_id(),
        owner_id=who.user_id,
        cron=asked.cron,
        every_s=asked.every_s,
        timezone=asked.timezone,
        prompt=asked.prompt,
        ws_id=asked.ws_id,
        policy=asked.policy.as_dict(),
        timeout_s=asked.timeout_s,
        webhook_id=asked.webhook_id,
        next_fire_at=first,
        created_by=who.name,
    )
    with rt.db.session() as s:
        held = s.exec(select(Schedule.id).where(ownership.owned_clause(Schedule.owner_id, who))).all()
        if len(held) >= MAX_SCHEDULES_PER_OWNER:
            raise ConflictError(f"at most {MAX_SCHEDULES_PER_OWNER} schedules each", field="cron")
        s.add(schedule)
    return schedule


def get(rt: Runtime, who: Principal, schedule_id: str) -> Schedule:
    return ownership.owned_row(rt, who, Schedule, schedule_id, "schedule")


def shown(schedule: Schedule, firings: list[ScheduleFiring] | None = None) -> dict[str, Any]:
    first = aware(schedule.next_fire_at)
    upcoming = (
        [] if schedule.paused else timing.upcoming(schedule.cron, schedule.every_s, schedule.timezone, first)
    )
    out: dict[str, Any] = {
        "schedule_id": schedule.id,
        "cron": schedule.cron,
        "every": schedule.every_s,
        "timezone": schedule.timezone,
        "prompt": schedule.prompt,
        "workstream": schedule.ws_id,
        "new_workstream_each_time": schedule.ws_id is None,
        "policy": schedule.policy,
        "timeout_s": schedule.timeout_s,
        "webhook": schedule.webhook_id,
        "paused": schedule.paused,
        "next_fire_times": [t.isoformat() for t in upcoming],
        "created_at": aware(schedule.created_at).isoformat(),
    }
    if firings is not None:
        out["firings"] = [
            {
                "fire_at": aware(f.fire_at).isoformat(),
                "run_id": f.run_id,
                "started": f.started,
                "error": f.error,
            }
            for f in firings
        ]
    return out


def describe(rt: Runtime, schedule: Schedule) -> dict[str, Any]:
    with rt.db.reader() as s:
        firings = s.exec(
            select(ScheduleFiring)
            .where(ScheduleFiring.schedule_id == schedule.id)
            .order_by(col(ScheduleFiring.fire_at).desc())
            .limit(SHOWN_FIRINGS)
        ).all()
    return shown(schedule, list(firings))


def listing(rt: Runtime, who: Principal) -> list[dict[str, Any]]:
    return [shown(r) for r in ownership.owned_rows(rt, who, Schedule)]


def set_paused(rt: Runtime, schedule: Schedule, paused: bool) -> Schedule:
    """Paused: it fires no more. Resumed: from its next time after now (what it missed while
    paused is not made up)."""
    with rt.db.session() as s:
        row = s.get(Schedule, schedule.id, with_for_update=True)
        if row is None:
            raise NotFoundError(f"no schedule {schedule.id}")
        if row.paused and not paused:
            row.next_fire_at = timing.next_after(row.cron, row.every_s, row.timezone, utcnow())
        row.paused = paused
        s.add(row)
    return row


def remove(rt: Runtime, schedule: Schedule) -> None:
    """The schedule and its firings' record; runs it started stay, as runs."""
    with rt.db.session() as s:
        s.exec(delete(ScheduleFiring).where(col(ScheduleFiring.schedule_id) == schedule.id))
        s.exec(delete(Schedule).where(col(Schedule.id) == schedule.id))
