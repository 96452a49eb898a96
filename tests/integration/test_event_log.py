"""Redis-backed pieces against a real Redis (a leased test database, flushed after each test): the
replay log (ids, trimming, expiry, what a lost log looks like), fencing, and worker presence."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
import redis

from app import redis_keys
from app.events import EventLog, Fence
from tests.integration.services import (
    REDIS_HOST,
    REDIS_LEASE_KEY,
    REDIS_PORT,
    free_port,
    holder_is_gone,
    lease_holder,
    lease_redis_db,
    take_lease,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def client():
    r = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=lease_redis_db())
    yield r
    r.flushdb()  # the lease goes with it


def lose_everything(client: redis.Redis) -> None:
    """Redis restarted without persistence, or flushed: every key gone but this run's lease."""
    for name in client.scan_iter():
        if name != REDIS_LEASE_KEY.encode():
            client.delete(name)


def wait_for_the_next_millisecond(client: redis.Redis) -> None:
    """Ids after a wipe start from Redis's clock (ms x 1000): they stay above the old ones as long as
    the old counter handed out fewer than 1000 ids per millisecond, which 3 events in the same
    millisecond would not."""

    def now_ms() -> int:
        seconds, micros = client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    start = now_ms()
    while now_ms() <= start + 1:
        pass


def test_ids_increase_per_workstream_and_replay_returns_what_follows(client):
    log = EventLog(client, maxlen=100)
    ids = [log.publish("ws1", "content", turn_id="t", text=str(n)) for n in range(5)]
    assert ids == list(range(ids[0], ids[0] + 5))  # consecutive: a relay detects a missed one
    assert ids[-1] < 2**53  # exact as a JavaScript number
    assert log.publish("ws2", "content", text="other") is not None
    events, truncated = log.replay("ws1", after=ids[1])
    assert [e["id"] for e in events] == ids[2:] and not truncated
    assert events[0]["text"] == "2" and events[0]["ws_id"] == "ws1" and events[0]["turn_id"] == "t"
    assert log.replay("ws1", after=0) == (log.replay("ws1", after=ids[0] - 1)[0], False)
    assert log.last_id("ws1") == ids[-1]


def test_an_events_time_is_to_the_microsecond_and_never_goes_back(client):
    # Hops of a turn are a fraction of a millisecond: times cut to the millisecond cannot tell
    # them apart (twenty events all on whole milliseconds: about one chance in 10^60).
    log = EventLog(client, maxlen=100)
    before = time.time()
    for n in range(20):
        log.publish("ws1", "content", text=str(n))
    stamps = [e["ts"] for e in log.replay("ws1", after=0)[0]]
    assert before - 0.001 <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= time.time()
    assert any(round(ts * 1000) != ts * 1000 for ts in stamps)
    assert all(round(ts, 6) == ts for ts in stamps)


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
    assert seen == list(range(seen[0], seen[0] + 200))


def test_a_stale_attempt_cannot_publish(client):
    log = EventLog(client, maxlen=100)
    log.set_fence(Fence("turn", 1))
    first = log.publish("ws", "content", fence=Fence("turn", 1))
    log.set_fence(Fence("turn", 2))  # the sweeper handed the turn to a new attempt
    assert log.publish("ws", "content", fence=Fence("turn", 1)) is None
    second = log.publish("ws", "content", fence=Fence("turn", 2))
    assert first is not None and second == first + 1
    assert [e["id"] for e in log.replay("ws", 0)[0]] == [first, second]


def test_a_claim_that_lost_a_race_does_not_lower_the_fence(client):
    log = EventLog(client, maxlen=100)
    log.set_fence(Fence("turn", 3))
    log.set_fence(Fence("turn", 2))  # the older claim's call arrives last
    assert log.publish("ws", "content", fence=Fence("turn", 2)) is None
    assert log.publish("ws", "content", fence=Fence("turn", 3)) is not None


def test_the_fence_survives_redis_losing_its_key(client):
    log = EventLog(client, maxlen=100)
    log.set_fence(Fence("turn", 3))
    assert log.publish("ws", "content", fence=Fence("turn", 3)) is not None
    client.delete(redis_keys.turn_fence("turn"))  # evicted, flushed, or Redis restarted empty
    end = log.publish("ws", "state_change", state="idle", fence=Fence("turn", 3))
    assert end is not None  # the running step's events, its end included, still go out
    assert log.publish("ws", "content", fence=Fence("turn", 2)) is None  # an older attempt: still stale
    lose_everything(client)
    assert log.publish("ws", "content", fence=Fence("turn", 4)) is not None  # a newer one takes over
    assert log.publish("ws", "content", fence=Fence("turn", 3)) is None


def test_a_cursor_older_than_the_log_is_told_so(client):
    log = EventLog(client, maxlen=10)
    ids = [log.publish("ws", "content") for _ in range(500)]
    events, truncated = log.replay("ws", after=ids[2])
    assert truncated and events[-1]["id"] == ids[-1] and len(events) == 10
    assert not log.replay("ws", after=ids[494])[1]
    assert log.replay("ws", after=0)[1]  # from the start: the start is gone


def test_a_cursor_ahead_of_the_log_means_the_log_was_lost(client):
    log = EventLog(client, maxlen=10)
    first = log.publish("ws", "content")
    assert log.replay("ws", after=first + 40)[1]


def test_ids_go_on_increasing_after_redis_loses_the_workstreams_keys(client):
    log = EventLog(client, maxlen=100)
    before = [log.publish("ws", "content", text=str(n)) for n in range(3)]
    lose_everything(client)  # what a Redis restarted without persistence holds
    wait_for_the_next_millisecond(client)  # a restart takes longer than the 3 events did
    assert log.last_id("ws") == 0 and log.replay("ws", after=0) == ([], False)
    assert log.replay("ws", after=before[-1])[1]  # a cursor from before the loss: re-read
    after = [log.publish("ws", "content", text=str(n)) for n in range(2)]
    assert after[0] > before[-1] and after[1] == after[0] + 1
    events, truncated = log.replay("ws", after=before[-1])
    assert truncated and [e["id"] for e in events] == after  # told, then what the new log holds
    assert log.replay("ws", after=0) == (events, False)  # a fresh reader misses nothing
    assert log.replay("ws", after=after[0]) == (events[1:], False)
    assert log.last_id("ws") == after[-1]


def test_ids_go_on_increasing_when_only_the_counter_is_lost(client):
    log = EventLog(client, maxlen=100)
    before = [log.publish("ws", "content") for _ in range(3)]
    client.delete(redis_keys.event_seq("ws"))  # evicted alone
    later = log.publish("ws", "content")
    assert later > before[-1]
    events, truncated = log.replay("ws", after=before[-2])
    assert truncated and [e["id"] for e in events] == [later]  # the old log went with its counter


def test_the_log_is_capped_by_size_and_keeps_the_newest_event(client):
    log = EventLog(client, maxlen=1000, max_bytes=20_000)
    ids = [log.publish("ws", "tool_output_chunk", text="x" * 1000) for _ in range(100)]
    events, truncated = log.replay("ws", after=0)
    size = sum(len(fields[b"e"]) for _id, fields in client.xrange(redis_keys.event_log("ws")))
    assert truncated and 15_000 < size <= 20_000
    assert [e["id"] for e in events] == ids[-len(events) :]
    huge = log.publish("ws", "tool_result", output="y" * 50_000)  # larger than the whole budget
    assert [e["id"] for e in log.replay("ws", after=0)[0]] == [huge]
    assert not log.replay("ws", after=huge - 1)[1]


def test_a_workstreams_event_keys_expire_unless_it_publishes(client):
    log = EventLog(client, maxlen=100, ttl_seconds=3600)
    log.publish("ws", "content")
    names = [redis_keys.event_seq("ws"), redis_keys.event_meta("ws"), redis_keys.event_log("ws")]
    client.expire(names[0], 10)
    log.publish("ws", "content")  # each event refreshes the time to live
    assert all(3590 < client.ttl(name) <= 3600 for name in names)
    log.delete("ws")
    assert not client.exists(*names)


def test_a_publish_whose_reply_was_lost_is_not_published_twice(client):
    log = EventLog(client, maxlen=100)
    original = log._run
    calls = []

    def lose_the_first_reply(*args):  # the script ran, then the connection dropped
        result = original(*args)
        calls.append(result)
        if len(calls) == 1:
            raise redis.ConnectionError("connection reset")
        return result

    log._run = lose_the_first_reply  # type: ignore[method-assign]
    event_id = log.publish("ws", "content", text="once")
    assert calls == [event_id, event_id]
    assert [e["id"] for e in log.replay("ws", 0)[0]] == [event_id]


def test_a_best_effort_publish_never_raises(client, caplog):
    log = EventLog(redis.Redis(host=REDIS_HOST, port=free_port(), socket_connect_timeout=0.2), maxlen=100)
    assert log.publish_best_effort("ws", "tool_output_chunk", call_id="c", text="secret output") is None
    assert "tool_output_chunk" in caplog.text and "secret output" not in caplog.text
    live = EventLog(client, maxlen=100)
    assert live.publish_best_effort("ws", "tool_output_chunk", text="out") == live.last_id("ws")


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


def test_a_test_run_that_died_leaves_its_redis_database_to_the_next(client):
    # A run killed before its clean-up kept its lease for two hours; eight such runs (benchmarks
    # stopped half-way) left no database for CI.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    client.set(REDIS_LEASE_KEY, lease_holder(dead.pid))
    client.set("a-dead-runs-queue", "its tasks")
    assert holder_is_gone(lease_holder(dead.pid)) and holder_is_gone(str(dead.pid))  # an older lease
    assert take_lease(client)
    assert client.get(REDIS_LEASE_KEY).decode() == lease_holder()
    assert client.get("a-dead-runs-queue") is None
    # A live holder keeps it, and so does one on another machine (never judged from here).
    for holder in (lease_holder(os.getppid()), f"elsewhere:{dead.pid}"):
        client.set(REDIS_LEASE_KEY, holder)
        assert not holder_is_gone(holder)
        assert not take_lease(client)
        assert client.get(REDIS_LEASE_KEY).decode() == holder
