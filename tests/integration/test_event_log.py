"""Redis-backed pieces against a real Redis (a leased test database, flushed after each test): the
replay log and fencing, and worker presence."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from app.events import EventLog, Fence
from tests.integration.services import REDIS_HOST, REDIS_PORT, lease_redis_db

pytestmark = pytest.mark.integration


@pytest.fixture
def client():
    r = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=lease_redis_db())
    yield r
    r.flushdb()  # the lease goes with it


def test_ids_increase_per_workstream_and_replay_returns_what_follows(client):
    log = EventLog(client, maxlen=100)
    ids = [log.publish("ws1", "content", turn_id="t", text=str(n)) for n in range(5)]
    assert ids == [1, 2, 3, 4, 5]
    assert log.publish("ws2", "content", text="other") == 1
    events, truncated = log.replay("ws1", after=2)
    assert [e["id"] for e in events] == [3, 4, 5] and not truncated
    assert events[0]["text"] == "2" and events[0]["ws_id"] == "ws1" and events[0]["turn_id"] == "t"


def test_the_live_channel_carries_the_same_events_in_id_order(client):
    log = EventLog(client, maxlen=100)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe("tj:ws:ws1:events")
    pubsub.get_message(timeout=1)
    threads = [
        threading.Thread(target=lambda: [log.publish("ws1", "x") for _ in range(50)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    import json

    seen = []
    while len(seen) < 200:
        message = pubsub.get_message(timeout=2)
        assert message is not None
        seen.append(json.loads(message["data"])["id"])
    assert seen == list(range(1, 201))


def test_a_stale_attempt_cannot_publish(client):
    log = EventLog(client, maxlen=100)
    log.set_fence(Fence("turn", 1))
    assert log.publish("ws", "content", fence=Fence("turn", 1)) == 1
    log.set_fence(Fence("turn", 2))  # the sweeper handed the turn to a new attempt
    assert log.publish("ws", "content", fence=Fence("turn", 1)) is None
    assert log.publish("ws", "content", fence=Fence("turn", 2)) == 2
    assert [e["id"] for e in log.replay("ws", 0)[0]] == [1, 2]


def test_a_cursor_older_than_the_log_is_told_so(client):
    log = EventLog(client, maxlen=10)
    for _ in range(500):
        log.publish("ws", "content")
    events, truncated = log.replay("ws", after=3)
    assert truncated and events[-1]["id"] == 500
    assert not log.replay("ws", after=495)[1]


def test_a_cursor_ahead_of_the_log_means_the_log_was_lost(client):
    log = EventLog(client, maxlen=10)
    log.publish("ws", "content")
    assert log.replay("ws", after=40)[1]


def test_worker_presence_is_counted_while_announced_and_gone_once_withdrawn(client):
    from app import presence

    first, second = presence.Presence(client, "a@host"), presence.Presence(client, "b@host")
    first.start()
    second.start()
    assert presence.count(client) == 2 and presence.is_present(client, "a@host")
    client.zadd("tj:workers", {"crashed@host": time.time() - 1})  # stopped renewing: lapsed
    assert presence.count(client) == 2 and not presence.is_present(client, "crashed@host")
    first.stop()
    assert presence.count(client) == 1
    second.stop()
    assert presence.count(client) == 0
