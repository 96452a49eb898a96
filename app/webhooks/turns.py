"""`turn.completed`: a turn of a user's workstream ended (done, error or cancelled), for the
endpoints that name the event and for a run's own endpoint. Beat's sweep records the turns
that ended since its last look (a cursor in Redis, read again with an overlap so that a turn
whose end committed late is not passed over); each is recorded under its own key, so a turn
seen twice is recorded once. With the cursor lost, the sweep looks back `FIRST_LOOK`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlmodel import col, select

from app.jobs.status import aware
from app.runtime import Runtime
from app.storage.models import (
    Message,
    Run,
    Turn,
    TurnStatus,
    WebhookDelivery,
    WebhookEndpoint,
    Workstream,
    utcnow,
)
from app.tools.core.tool import TASK
from app.webhooks import deliveries

EVENT = "turn.completed"
CURSOR_KEY = "tj:webhooks:turns-seen"  # the latest end time recorded, ISO 8601
OVERLAP = timedelta(seconds=60)  # ends stamped before a slow commit are seen on a later look
FIRST_LOOK = timedelta(minutes=10)
BATCH = 500
ENDED = (TurnStatus.DONE, TurnStatus.ERROR, TurnStatus.CANCELLED)


def completed(rt: Runtime) -> list[str]:
    """Record `turn.completed` for the turns that ended since the last look; the deliveries made."""
    now = utcnow()
    since = _cursor(rt, now) - OVERLAP
    with rt.db.reader() as s:
        listening = {
            e.owner_id for e in s.exec(select(WebhookEndpoint)).all() if deliveries.takes(e.events, EVENT)
        }
        rows = s.exec(
            select(Turn, Workstream.owner_id, Run.id, Run.webhook_id)
            .join(Workstream, col(Workstream.id) == col(Turn.ws_id))
            .outerjoin(Run, col(Run.turn_id) == col(Turn.id))
            .where(col(Turn.status).in_(ENDED), col(Turn.ended_at) > since, Workstream.kind != TASK)
            .order_by(col(Turn.ended_at))
            .limit(BATCH)
        ).all()
        keys = [f"{EVENT}:{turn.id}" for turn, *_ in rows]
        # recorded on an earlier look (a turn's deliveries are recorded in one transaction)
        recorded = set(
            s.exec(select(WebhookDelivery.event_key).where(col(WebhookDelivery.event_key).in_(keys))).all()
        )
    made: list[str] = []
    latest = None
    for turn, owner_id, run_id, webhook_id in rows:
        latest = turn.ended_at
        if (owner_id not in listening and webhook_id is None) or f"{EVENT}:{turn.id}" in recorded:
            continue
        with rt.db.session() as s:
            data = _data(s, turn, run_id)
            made += deliveries.record(s, owner_id, EVENT, f"{EVENT}:{turn.id}", data, also=webhook_id)
    full = latest is not None and len(rows) == BATCH  # the rest on the next look
    # a full batch: the next look begins at its last end (less the overlap it adds back)
    kept = aware(latest) + OVERLAP if full and latest else now
    rt.redis.set(CURSOR_KEY, kept.isoformat())
    for delivery_id in made:
        rt.queue.deliver_webhook(delivery_id)
    return made


def _cursor(rt: Runtime, now: datetime) -> datetime:
    raw = rt.redis.get(CURSOR_KEY)
    if raw is None:
        return now - FIRST_LOOK
    return aware(datetime.fromisoformat(raw.decode() if isinstance(raw, bytes) else raw))


def _data(s: Any, turn: Turn, run_id: str | None) -> dict[str, Any]:
    answer = s.exec(
        select(Message.content)
        .where(Message.turn_id == turn.id, Message.role == "assistant")
        .order_by(col(Message.id).desc())
        .limit(1)
    ).first()
    return {
        "ws_id": turn.ws_id,
        "turn_id": turn.id,
        "run_id": run_id,
        "status": turn.status,
        "answer": answer,
        "error": turn.error,
        "origin": turn.origin,
        "ended_at": aware(turn.ended_at).isoformat() if turn.ended_at else None,
    }
