"""The bounded queue behind each websocket, and the settings that size the event machinery."""

from __future__ import annotations

import queue

import pytest

from app.settings import DEFAULT_REDIS_RETRY_SECONDS, Settings
from app.web.fanout import RESYNC, STOP, LiveQueue


def event(n: int) -> dict[str, object]:
    return {"type": "content", "id": n}


def test_an_overflowing_queue_empties_itself_and_holds_one_resync_until_resumed():
    q = LiveQueue(maxsize=3)
    for n in range(1, 4):
        q.offer(event(n))
    assert q.qsize() == 3
    for n in range(4, 100):
        q.offer(event(n))  # a client that does not read
    assert q.qsize() == 1 and q.get(timeout=1)["type"] == RESYNC
    q.offer(event(100))  # still dropped: the relay has not re-read the log yet
    assert q.qsize() == 0
    q.resume()
    q.offer(event(101))
    assert q.get(timeout=1) == event(101)


def test_control_items_always_fit():
    q = LiveQueue(maxsize=2)
    q.offer(event(1))
    q.offer(event(2))
    q.put({"type": STOP})
    assert q.qsize() <= 2 and q.get(timeout=1)["type"] == STOP


def test_get_times_out_on_an_empty_queue():
    with pytest.raises(queue.Empty):
        LiveQueue(maxsize=2).get(timeout=0.01)


def test_the_redis_retry_window_comes_from_the_environment():
    assert Settings.from_mapping({}, {}).redis_retry_seconds == DEFAULT_REDIS_RETRY_SECONDS
    assert Settings.from_mapping({}, {"TURNSTONE_REDIS_RETRY_SECONDS": "2.5"}).redis_retry_seconds == 2.5
