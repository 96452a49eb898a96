"""What a person does to a workstream's watches through the API: list them, cancel one."""

from __future__ import annotations

from typing import Any

from app.engine.life import workstreams
from app.errors import ConflictError, NotFoundError
from app.events import EventType
from app.runtime import Runtime
from app.watches import store


def listing(rt: Runtime, ws_id: str) -> dict[str, Any]:
    workstreams.get(rt, ws_id)  # 404 for an unknown workstream
    return {"ws_id": ws_id, "watches": [store.summary(w) for w in store.listing(rt.db, ws_id)]}


def cancel(rt: Runtime, ws_id: str, watch_id: str) -> dict[str, Any]:
    """The cancelled watch; 404 when the workstream has no such watch, 409 when it has ended."""
    workstreams.get(rt, ws_id)
    watch = store.get(rt.db, ws_id, watch_id)
    if watch is None:
        raise NotFoundError(f"no watch {watch_id[:32]!r} in workstream {ws_id}")
    ended = store.cancel(rt.db, watch.id)
    if ended is None:
        raise ConflictError(f"watch {watch.name!r} has already ended ({watch.status})")
    summary = store.summary(ended)
    rt.events.publish(ws_id, EventType.WATCH, watch=summary)
    return summary
