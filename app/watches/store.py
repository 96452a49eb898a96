"""A workstream's watches: creating one within the limits, listing, cancelling, describing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from app.storage.database import Database
from app.storage.models import Watch, WatchStatus, Workstream, utcnow
from app.watches.intervals import describe

WATCH_MAX_ACTIVE = 5  # per workstream

MIN_ID_PREFIX = 4  # a shorter prefix would match too much to be meant
LISTED_ENDED = 20  # ended watches the API lists after the active ones


class WatchError(ValueError):
    """A watch request refused: the message says which limit or rule, for the model or a person."""


@dataclass(frozen=True)
class WatchSpec:
    """A validated `create`: what the handler's prepare phase checked."""

    name: str
    command: str
    poll_every: int  # seconds
    stop_on: str | None
    max_polls: int


def create(db: Database, ws_id: str, spec: WatchSpec, created_by: str | None = None) -> Watch:
    """Store an active watch whose first poll is due at once; WatchError past a limit."""
    watch = Watch(
        id=uuid.uuid4().hex,
        ws_id=ws_id,
        name=spec.name,
        command=spec.command,
        poll_every=spec.poll_every,
        stop_on=spec.stop_on,
        max_polls=spec.max_polls,
        next_poll_at=utcnow(),
        created_by=created_by,
    )
    try:
        with db.session() as s:
            # The workstream's row, locked: two creates of one batch run on two threads, and
            # each must see the other's watch when it counts.
            if s.exec(select(Workstream.id).where(Workstream.id == ws_id).with_for_update()).first() is None:
                raise WatchError(f"Error: no workstream {ws_id}")
            check_room(active_watches(s, ws_id), spec.name)
            s.add(watch)
    except IntegrityError:  # the partial unique index: a racing create took the name
        raise WatchError(_duplicate(spec.name)) from None
    return watch


def check_room(active: list[Watch], name: str) -> None:
    """WatchError when a watch named `name` cannot join the `active` ones."""
    if any(w.name == name for w in active):
        raise WatchError(_duplicate(name))
    if len(active) >= WATCH_MAX_ACTIVE:
        names = ", ".join(w.name for w in active)
        raise WatchError(
            f"Error: this workstream already has {len(active)} active watches ({names}); the limit is "
            f"{WATCH_MAX_ACTIVE}. Cancel one before creating another."
        )


def _duplicate(name: str) -> str:
    return f"Error: an active watch named {name!r} already exists in this workstream; pick another name"


def active_watches(s: Session, ws_id: str) -> list[Watch]:
    return list(
        s.exec(
            select(Watch)
            .where(Watch.ws_id == ws_id, Watch.status == WatchStatus.ACTIVE)
            .order_by(col(Watch.created_at), col(Watch.id))
        ).all()
    )


def listing(db: Database, ws_id: str) -> list[Watch]:
    """Active watches first (oldest first), then the most recently ended ones."""
    with db.reader() as s:
        ended = s.exec(
            select(Watch)
            .where(Watch.ws_id == ws_id, Watch.status != WatchStatus.ACTIVE)
            .order_by(col(Watch.ended_at).desc(), col(Watch.id))
            .limit(LISTED_ENDED)
        ).all()
        return active_watches(s, ws_id) + list(ended)


def count_active(db: Database, ws_id: str) -> int:
    with db.reader() as s:
        return int(
            s.exec(
                select(func.count())
                .select_from(Watch)
                .where(Watch.ws_id == ws_id, Watch.status == WatchStatus.ACTIVE)
            ).one()
        )


def find_active(db: Database, ws_id: str, ref: str) -> Watch:
    """The active watch named `ref`, or whose id starts with it; WatchError otherwise."""
    with db.reader() as s:
        active = active_watches(s, ws_id)
    named = [w for w in active if w.name == ref]
    if named:
        return named[0]
    prefixed = [w for w in active if len(ref) >= MIN_ID_PREFIX and w.id.startswith(ref.lower())]
    if len(prefixed) == 1:
        return prefixed[0]
    if len(prefixed) > 1:
        ids = ", ".join(f"{w.id[:12]} ({w.name})" for w in prefixed)
        raise WatchError(f"Error: {ref!r} matches several watches: {ids}; give more of the id or the name")
    known = ", ".join(f"{w.name} ({w.id[:8]})" for w in active) or "none"
    raise WatchError(f"Error: no active watch named {ref!r} or with an id starting so; active: {known}")


def cancel(db: Database, watch_id: str) -> Watch | None:
    """active -> cancelled; None when it had ended already (fired, cancelled)."""
    with db.session() as s:
        moved = s.exec(
            update(Watch)
            .where(col(Watch.id) == watch_id, col(Watch.status) == WatchStatus.ACTIVE)
            .values(status=WatchStatus.CANCELLED, ended_at=utcnow(), claim_token=None, claimed_at=None)
        )
        if moved.rowcount != 1:
            return None
        return s.get(Watch, watch_id, populate_existing=True)


def get(db: Database, ws_id: str, watch_id: str) -> Watch | None:
    with db.reader() as s:
        watch = s.get(Watch, watch_id)
    return watch if watch is not None and watch.ws_id == ws_id else None


def summary(watch: Watch) -> dict[str, Any]:
    """A watch as the API, the events and the `list` action show it."""
    return {
        "watch_id": watch.id,
        "ws_id": watch.ws_id,
        "name": watch.name,
        "command": watch.command,
        "poll_every": describe(watch.poll_every),
        "poll_every_seconds": watch.poll_every,
        "stop_on": watch.stop_on,
        "max_polls": watch.max_polls,
        "polls": watch.polls,
        "status": watch.status,
        "next_poll_at": _iso(watch.next_poll_at) if watch.status == WatchStatus.ACTIVE else None,
        "last_polled_at": _iso(watch.last_polled_at),
        "last_exit_code": watch.last_exit_code,
        "last_error": watch.last_error,
        "created_at": _iso(watch.created_at),
        "ended_at": _iso(watch.ended_at),
    }


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # SQLite hands back what it stored, in UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()
