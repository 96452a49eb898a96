"""A due webhook delivery is sent to the workers once, not on every sweep while it waits in a
backlog (app/webhooks/deliveries.py `due`), and an attempt that finds its process's slots taken
hands it back for the next sweep."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.settings import Settings
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import WebhookDelivery, WebhookEndpoint, utcnow
from app.webhooks import deliveries


@pytest.fixture
def rt(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    db = Database(url)
    settings = Settings.from_mapping({"webhooks": {"concurrency": 1}}, {})
    yield SimpleNamespace(db=db, settings=settings, queue=Sent())
    db.dispose()


class Sent:
    """The task queue, as far as deliveries use it: what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, float | None]] = []

    def deliver_webhook(self, delivery_id: str, countdown: float | None = None) -> None:
        self.sent.append((delivery_id, countdown))


def recorded(rt, count: int) -> list[str]:
    endpoint = WebhookEndpoint(
        id=uuid.uuid4().hex, owner_id=None, url="http://127.0.0.1:9/h", secret="whsec_" + "A" * 44
    )
    with rt.db.session() as s:
        s.add(endpoint)
    with rt.db.session() as s:
        # for this endpoint alone (a run's own endpoint takes every event of its run)
        made = [
            deliveries.record(
                s, "no-owner", "run.succeeded", f"run.succeeded:{n}", {"n": n}, also=endpoint.id
            )
            for n in range(count)
        ]
    assert all(len(one) == 1 for one in made)
    return [one[0] for one in made]


def test_a_due_delivery_is_sent_once_until_its_lease_passes(rt):
    made = recorded(rt, 3)
    assert len(made) == 3  # recorded, and said so (psycopg's rowcount is -1: RETURNING says it)
    assert sorted(deliveries.due(rt)) == sorted(made)
    assert deliveries.due(rt) == []  # the next sweeps: still queued, not sent again
    with rt.db.session() as s:  # its task lost: the lease passes, and a sweep sends it again
        row = s.get(WebhookDelivery, made[0])
        row.queued_until = utcnow() - timedelta(seconds=1)
        s.add(row)
    assert deliveries.due(rt) == [made[0]]


def test_an_attempt_past_its_processs_slots_hands_the_delivery_back(rt, monkeypatch):
    (made,) = recorded(rt, 1)
    assert deliveries.due(rt) == [made]
    monkeypatch.setattr(deliveries, "_slots", threading.BoundedSemaphore(1))
    deliveries._slots.acquire()  # the one slot is taken by an attempt under way
    try:
        assert deliveries.attempt(rt, made) == deliveries.BUSY
    finally:
        deliveries._slots.release()
    assert rt.queue.sent == [(made, deliveries.BUSY_DELAY_SECONDS)]  # its task again, a second later
    with rt.db.reader() as s:
        row = s.get(WebhookDelivery, made)
        assert row.attempts == 0 and row.status == deliveries.PENDING  # no attempt counted
    assert deliveries.due(rt) == []  # and the sweeps leave it to that task


def test_a_sweep_sends_a_bounded_batch_oldest_first(rt):
    made = recorded(rt, deliveries.DUE_PER_SWEEP + 5)
    first = deliveries.due(rt)
    assert len(first) == deliveries.DUE_PER_SWEEP
    assert sorted(first + deliveries.due(rt)) == sorted(made)  # the rest on the next
