"""The `services` table: a gateway registers at start and heartbeats; callers pick a fresh one."""

from __future__ import annotations

import uuid

from sqlmodel import col, delete, select, update

from app.storage.database import Database
from app.storage.models import ServiceRecord

FORGET_AFTER_SECONDS = 24 * 3600  # rows of processes long dead are removed at the next start


def register(db: Database, kind: str, url: str) -> str:
    """A row for this process; its id (the heartbeat's key)."""
    service_id = uuid.uuid4().hex
    with db.session() as s:
        s.exec(delete(ServiceRecord).where(col(ServiceRecord.heartbeat_at) < db.ago(FORGET_AFTER_SECONDS)))
        s.add(ServiceRecord(id=service_id, kind=kind, url=url, started_at=db.now(), heartbeat_at=db.now()))
    return service_id


def heartbeat(db: Database, service_id: str, kind: str, url: str) -> None:
    """Fresh again; the row comes back if someone removed it."""
    with db.session() as s:
        found = s.exec(
            update(ServiceRecord).where(col(ServiceRecord.id) == service_id).values(heartbeat_at=db.now())
        ).rowcount
        if not found:
            s.add(
                ServiceRecord(id=service_id, kind=kind, url=url, started_at=db.now(), heartbeat_at=db.now())
            )


def unregister(db: Database, service_id: str) -> None:
    with db.session() as s:
        s.exec(delete(ServiceRecord).where(col(ServiceRecord.id) == service_id))


def healthy_urls(db: Database, kind: str, stale_seconds: float) -> list[str]:
    """The URLs of this kind's services whose heartbeat is younger than `stale_seconds`, the
    freshest first."""
    with db.reader() as s:
        rows = s.exec(
            select(ServiceRecord.url)
            .where(ServiceRecord.kind == kind, col(ServiceRecord.heartbeat_at) > db.ago(stale_seconds))
            .order_by(col(ServiceRecord.heartbeat_at).desc())
        ).all()
    return list(dict.fromkeys(rows))
