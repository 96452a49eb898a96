"""Deliveries: each event recorded for each endpoint (with the exact body it is signed and sent
with) before any attempt; an attempt claims its delivery, POSTs it to the checked address and
stores the outcome: delivered, or the next attempt's time (backoff), or failed after a day."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Row, or_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from app.errors import ConflictError, NotFoundError
from app.jobs.status import aware
from app.metrics.definitions import WEBHOOK_ATTEMPTS
from app.runtime import Runtime
from app.storage.models import WebhookDelivery, WebhookEndpoint, utcnow
from app.tools.web.fetch import FetchError, RefusedError
from app.webhooks import endpoints, signing

log = logging.getLogger(__name__)

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
BUSY = "busy"  # an attempt's task outcome: this worker's slots were all taken, sent again later
CLAIM_MARGIN_SECONDS = 30.0  # past an attempt's timeout: its worker died, the claim lapses
# A delivery sent to the workers is theirs for this long: the sweep sends it again only after
# (its task was lost with a broker, or is still queued behind a backlog that long).
QUEUE_LEASE_SECONDS = 120.0
DUE_PER_SWEEP = 50  # deliveries a sweep sends, at most (the oldest due first); the rest wait for the next
BUSY_DELAY_SECONDS = 1.0  # a delivery that found no slot is tried again this much later
MAX_ERROR_CHARS = 500
MAX_LISTED = 200


def record(
    s: Session,
    owner_id: str | None,
    event_type: str,
    key: str,
    data: dict[str, Any],
    also: str | None = None,
) -> list[str]:
    """Inside the caller's transaction: one delivery of the event for each endpoint of
    `owner_id` that takes it, and for endpoint `also` (a run's or schedule's own: it takes every
    event of theirs); the ids of those recorded now (one recorded before is not again).
    `turn.completed` (every turn: frequent) reaches only endpoints that name it."""
    owner = col(WebhookEndpoint.owner_id)
    mine = owner.is_(None) if owner_id is None else owner == owner_id
    found = s.exec(select(WebhookEndpoint).where(or_(mine, col(WebhookEndpoint.id) == also)))
    now = utcnow()
    body = json.dumps({"type": event_type, "timestamp": now.isoformat(), "data": data}, ensure_ascii=False)
    made = []
    dialect = postgresql if s.get_bind().dialect.name == "postgresql" else sqlite
    for endpoint in found.all():
        if endpoint.id != also and not takes(endpoint.events, event_type):
            continue
        msg_id = f"msg_{uuid.uuid4().hex}"
        values = {
            "id": msg_id,
            "endpoint_id": endpoint.id,
            "event_type": event_type,
            "event_key": key,
            "payload": body,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        statement = dialect.insert(WebhookDelivery).values(**values).on_conflict_do_nothing()
        # RETURNING, not rowcount: psycopg reports -1 for an insert that may do nothing, and a
        # delivery recorded but not sent would wait for the sweep (and the queue lease below).
        if s.connection().execute(statement.returning(col(WebhookDelivery.id))).first() is not None:
            made.append(msg_id)
    return made


def takes(events: list[str], event_type: str) -> bool:
    """Whether an endpoint listening for `events` ([]: all but the opt-in ones) gets the event."""
    if event_type in endpoints.OPT_IN:
        return event_type in events
    return not events or event_type in events


_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _process_slots(concurrency: int) -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(concurrency)
        return _slots


def attempt(rt: Runtime, delivery_id: str) -> str | None:
    """One attempt, if the delivery is due and nobody is attempting it; its status after. A
    worker process makes `[webhooks] concurrency` attempts at once: a slow receiver holds a
    thread until its timeout, and the threads are the whole service's. Past that its task comes
    back a second later (`busy`)."""
    slots = _process_slots(rt.settings.webhooks.concurrency)
    if not slots.acquire(blocking=False):
        _hand_back(rt, delivery_id)
        return BUSY
    try:
        return _attempt(rt, delivery_id)
    finally:
        slots.release()


def _hand_back(rt: Runtime, delivery_id: str) -> None:
    """Not attempted (no slot): the same task again a little later, straight to the broker (no
    attempt counted, nothing written). Should it be lost, the delivery is still due, and a sweep
    sends it once its queue lease has passed."""
    rt.queue.deliver_webhook(delivery_id, countdown=BUSY_DELAY_SECONDS)


def _attempt(rt: Runtime, delivery_id: str) -> str | None:
    settings = rt.settings.webhooks
    now = utcnow()
    with rt.db.session() as s:
        claimed = s.exec(
            update(WebhookDelivery)
            .where(
                col(WebhookDelivery.id) == delivery_id,
                col(WebhookDelivery.status) == PENDING,
                col(WebhookDelivery.next_attempt_at) <= now,
                or_(col(WebhookDelivery.claimed_until).is_(None), col(WebhookDelivery.claimed_until) < now),
            )
            .values(
                claimed_until=now + timedelta(seconds=settings.timeout_seconds + CLAIM_MARGIN_SECONDS),
                attempts=col(WebhookDelivery.attempts) + 1,
            )
        )
        if claimed.rowcount != 1:
            return None
        delivery = s.get(WebhookDelivery, delivery_id)
        endpoint = s.get(WebhookEndpoint, delivery.endpoint_id) if delivery else None
    if delivery is None or endpoint is None:
        return None
    code, error = _send(rt, endpoint, delivery)
    return _settle(rt, delivery, code, error)


def _send(rt: Runtime, endpoint: WebhookEndpoint, delivery: WebhookDelivery) -> tuple[int | None, str | None]:
    """POST the stored body to the endpoint's checked address; (status, None) or (status, why)."""
    try:
        target = endpoints.target(rt, endpoint.url)
    except (RefusedError, FetchError) as exc:
        return None, str(exc)
    import httpx  # here, not at the top: the web process loads it only when it sends (see lean tests)

    from app.tools.web.fetch.transport import PinnedTransport

    transport = PinnedTransport(target.addresses)
    timeout = httpx.Timeout(rt.settings.webhooks.timeout_seconds)
    headers = signing.headers(endpoint.secret, delivery.id, datetime.now(UTC), delivery.payload)
    headers["user-agent"] = "turnstone-jobs-webhooks"
    try:
        with httpx.Client(transport=transport, timeout=timeout, trust_env=False, follow_redirects=False) as c:
            r = c.post(target.url, content=delivery.payload.encode(), headers=headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
    if 200 <= r.status_code < 300:
        return r.status_code, None
    return r.status_code, f"answered {r.status_code}"


def _settle(rt: Runtime, delivery: WebhookDelivery, code: int | None, error: str | None) -> str:
    now = utcnow()
    settings = rt.settings.webhooks
    if error is None:
        values: dict[str, Any] = {"status": DELIVERED, "delivered_at": now, "next_attempt_at": None}
    else:
        delays = settings.retry_delays
        later = now + timedelta(seconds=delays[min(delivery.attempts, len(delays)) - 1])
        over = aware(delivery.created_at) + timedelta(seconds=settings.give_up_seconds)
        values = {"status": FAILED, "next_attempt_at": None} if later > over else {"next_attempt_at": later}
        log.info("webhook %s: attempt %d failed (%s)", delivery.id, delivery.attempts, error)
    with rt.db.session() as s:
        s.exec(
            update(WebhookDelivery)
            .where(col(WebhookDelivery.id) == delivery.id)
            .values(claimed_until=None, queued_until=None, last_status=code, last_error=error, **values)
        )
    outcome = str(values.get("status", PENDING))
    WEBHOOK_ATTEMPTS.labels(outcome="retry" if outcome == PENDING else outcome).inc()
    return outcome


def due(rt: Runtime, limit: int = DUE_PER_SWEEP) -> list[str]:
    """Pending deliveries whose time has come, that nobody is attempting and that are not sent
    to the workers already; each is marked sent (`queued_until`) here, so the sweep after this
    one does not send it again while it waits in the queue."""
    now = utcnow()
    free = or_(col(WebhookDelivery.queued_until).is_(None), col(WebhookDelivery.queued_until) < now)
    with rt.db.session() as s:
        rows = s.exec(
            select(WebhookDelivery.id)
            .where(
                col(WebhookDelivery.status) == PENDING,
                col(WebhookDelivery.next_attempt_at) <= now,
                or_(col(WebhookDelivery.claimed_until).is_(None), col(WebhookDelivery.claimed_until) < now),
                free,
            )
            .order_by(col(WebhookDelivery.next_attempt_at))
            .limit(limit)
        ).all()
        if not rows:
            return []
        taken = s.exec(
            update(WebhookDelivery)
            .where(col(WebhookDelivery.id).in_(list(rows)), free)
            .values(queued_until=now + timedelta(seconds=QUEUE_LEASE_SECONDS))
            .returning(col(WebhookDelivery.id))
        ).all()
    return [row[0] if isinstance(row, tuple | Row) else row for row in taken]


def log_of(rt: Runtime, endpoint_id: str, limit: int) -> list[dict[str, Any]]:
    with rt.db.reader() as s:
        rows = s.exec(
            select(WebhookDelivery)
            .where(col(WebhookDelivery.endpoint_id) == endpoint_id)
            .order_by(col(WebhookDelivery.created_at).desc(), col(WebhookDelivery.id))
            .limit(min(limit, MAX_LISTED))
        ).all()
    return [shown(d) for d in rows]


def shown(d: WebhookDelivery) -> dict[str, Any]:
    def at(moment: datetime | None) -> str | None:
        return aware(moment).isoformat() if moment else None

    return {
        "delivery_id": d.id,
        "event_type": d.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "created_at": at(d.created_at),
        "next_attempt_at": at(d.next_attempt_at),
        "delivered_at": at(d.delivered_at),
        "payload": json.loads(d.payload),
    }


def redeliver(rt: Runtime, endpoint_id: str, delivery_id: str) -> dict[str, Any]:
    """One more attempt now, whatever became of the earlier ones (a retry already due or under
    way is a 409: it is being sent)."""
    with rt.db.session() as s:
        row = s.get(WebhookDelivery, delivery_id, with_for_update=True)
        if row is None or row.endpoint_id != endpoint_id:
            raise NotFoundError(f"no delivery {delivery_id}")
        if row.claimed_until is not None and aware(row.claimed_until) > utcnow():
            raise ConflictError(f"delivery {delivery_id} is being attempted now")
        row.status, row.next_attempt_at, row.claimed_until = PENDING, utcnow(), None
        row.queued_until = utcnow() + timedelta(seconds=QUEUE_LEASE_SECONDS)  # sent just below
        s.add(row)
    rt.queue.deliver_webhook(delivery_id)
    with rt.db.reader() as s:
        fresh = s.get(WebhookDelivery, delivery_id)
        assert fresh is not None
        return shown(fresh)
