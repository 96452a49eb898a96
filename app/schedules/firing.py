"""Beat's part: fire the schedules that are due. A firing is claimed by inserting its unique
(schedule, fire time) row with its run's id, in the transaction that moves the schedule on to
its next time after now, so two beats, a restarted one or a repeated pass fire each time once,
and a schedule that missed several times while the service was down fires once. The run is
then started under the id the claim chose, so a pass that dies in between is finished by the
next (app/jobs/store.py stores it once)."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from app.engine.life.turns import new_id
from app.errors import ServiceError
from app.jobs import store as runs
from app.jobs.contract import Policy
from app.jobs.status import aware
from app.runtime import Runtime
from app.schedules import timing
from app.storage.models import Schedule, ScheduleFiring, utcnow
from app.users.principal import Principal
from app.users.scopes import ALL_SCOPES, USER_SCOPES

log = logging.getLogger(__name__)

BATCH = 100


def sweep(rt: Runtime) -> int:
    """Fire what is due, then start the runs of firings claimed but not started; the number."""
    now = utcnow()
    with rt.db.reader() as s:
        due = s.exec(
            select(Schedule)
            .where(col(Schedule.paused).is_(False), col(Schedule.next_fire_at) <= now)
            .limit(BATCH)
        ).all()
    claimed = [f for schedule in due if (f := _claim(rt, schedule, now)) is not None]
    with rt.db.reader() as s:
        unstarted = s.exec(
            select(ScheduleFiring).where(col(ScheduleFiring.started).is_(False)).limit(BATCH)
        ).all()
    for firing in unstarted:
        _start(rt, firing)
    return len(claimed)


def _claim(rt: Runtime, schedule: Schedule, now: datetime) -> ScheduleFiring | None:
    try:
        following = timing.next_after(schedule.cron, schedule.every_s, schedule.timezone, now)
    except timing.TimingError:
        return None  # checked when it was made; a timezone gone from the system stops it
    firing = ScheduleFiring(schedule_id=schedule.id, fire_at=schedule.next_fire_at, run_id=new_id())
    try:
        with rt.db.session() as s:
            moved = s.exec(
                update(Schedule)
                .where(col(Schedule.id) == schedule.id, col(Schedule.next_fire_at) == schedule.next_fire_at)
                .values(next_fire_at=following)
            )
            if moved.rowcount != 1:
                raise _Taken
            s.add(firing)
    except (_Taken, IntegrityError):
        return None  # another pass fired this time
    return firing


class _Taken(Exception):
    """Another pass moved the schedule on first: roll back, fire nothing."""


def _start(rt: Runtime, firing: ScheduleFiring) -> None:
    with rt.db.reader() as s:
        schedule = s.get(Schedule, firing.schedule_id)
    error = None
    if schedule is not None:
        scopes = ALL_SCOPES if schedule.owner_id is None else USER_SCOPES
        who = Principal(
            name=f"schedule {schedule.id[:8]}", user_id=schedule.owner_id, scopes=frozenset(scopes)
        )
        asked = runs.Asked(
            prompt=schedule.prompt,
            ws_id=schedule.ws_id,
            model=None,
            policy=Policy.from_stored(schedule.policy),
            timeout_s=schedule.timeout_s,
            metadata={"schedule_id": schedule.id, "fire_at": aware(firing.fire_at).isoformat()},
            webhook_id=schedule.webhook_id,
        )
        try:
            runs.create(rt, who, asked, run_id=firing.run_id)
        except ServiceError as exc:  # its workstream gone, say: recorded, and not tried again
            error = exc.message
            log.warning(
                "schedule %s: its firing at %s started no run: %s", schedule.id, firing.fire_at, error
            )
    with rt.db.session() as s:
        s.exec(
            update(ScheduleFiring)
            .where(col(ScheduleFiring.id) == firing.id)
            .values(started=True, error=error)
        )
