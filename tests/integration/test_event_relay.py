"""The websocket relay and the process's fan-out against a real Redis: no gap and no duplicate when
live delivery misses events (a lost subscription, a Redis outage) or a client stops reading."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from app.events import EventLog
from app.settings import Settings
from app.web.fanout import Fanout
from app.web.websocket import _relay
from tests.integration.redis_faults import RedisProxy
from tests.integration.services import REDIS_HOST, REDIS_PORT, lease_redis_db

pytestmark = pytest.mark.integration


class RecordingSocket:
    """Stands in for the client end of a websocket: keeps every frame; while `reading` is clear,
    `send` blocks as it does when a client stops reading and the TCP buffers are full."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.reading = threading.Event()
        self.reading.set()
        self.sending = threading.Event()  # set while a send is blocked on a client that does not read
        self._cond = threading.Condition()

    def send(self, text: str) -> None:
        if not self.reading.is_set():
            self.sending.set()
            self.reading.wait()
        with self._cond:
            self.frames.append(json.loads(text))
            self._cond.notify_all()

    def close(self) -> None:
        pass

    def ids(self) -> list[int | None]:
        with self._cond:
            return [f["id"] for f in self.frames]

    def wait_for(self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 15) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: done(self.frames), timeout):
                raise AssertionError(f"frames so far: {[(f['type'], f['id']) for f in self.frames]}")


@pytest.fixture
def db() -> Iterator[int]:
    number = lease_redis_db()
    yield number
    redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number).flushdb()  # the lease goes with it


@pytest.fixture
def client(db: int) -> redis.Redis:
    return redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)


@pytest.fixture
def relay_for() -> Iterator[Callable[..., RecordingSocket]]:
    """relay_for(rt, ws_id, live, after=0): a relay thread writing to a RecordingSocket."""
    running: list[tuple[threading.Thread, Any, threading.Event, RecordingSocket]] = []

    def _start(rt: Any, ws_id: str, live: Any, after: int = 0) -> RecordingSocket:
        ws, stop = RecordingSocket(), threading.Event()
        thread = threading.Thread(target=_relay, args=(ws, rt, ws_id, after, live, stop), daemon=True)
        thread.start()
        running.append((thread, live, stop, ws))
        return ws

    yield _start
    for thread, live, stop, ws in running:
        stop.set()
        ws.reading.set()
        live.put({"type": "_stop"})
        thread.join(timeout=5)


def runtime(client: redis.Redis, **log_options: Any) -> Any:
    return SimpleNamespace(
        redis=client, waits_out_outages=True, events=EventLog(client, **log_options), settings=Settings()
    )


def test_a_live_event_that_skips_ids_makes_the_relay_replay_what_it_skipped(client, relay_for):
    rt = runtime(client, maxlen=100)
    first = [rt.events.publish("ws", "content", text=str(n)) for n in range(2)]
    live: queue.Queue[dict[str, Any]] = queue.Queue()
    ws = relay_for(rt, "ws", live)
    ws.wait_for(lambda frames: len(frames) == 2)
    later = [rt.events.publish("ws", "content", text=str(n)) for n in range(2, 4)]
    # Pub/sub lost the third event on its way (a dropped subscription): only the fourth arrives live.
    live.put(rt.events.replay("ws", later[0])[0][0])
    ws.wait_for(lambda frames: len(frames) >= 4)
    assert ws.ids() == first + later


def test_events_published_while_the_subscription_is_down_are_delivered_once_it_is_back(db, client, relay_for):
    proxy = RedisProxy(REDIS_HOST, REDIS_PORT)  # only the fan-out's connection goes through it
    try:
        rt = runtime(client, maxlen=100)
        fanout = Fanout(redis.Redis.from_url(proxy.url(db), health_check_interval=30))
        ws = relay_for(rt, "ws", fanout.subscribe("ws"))
        before = rt.events.publish("ws", "content", text="before")
        ws.wait_for(lambda frames: len(frames) == 1)
        proxy.cut()
        during = rt.events.publish("ws", "content", text="while nobody listened")
        proxy.restore()  # redis-py reconnects and re-subscribes inside listen(); nothing follows
        ws.wait_for(lambda frames: len(frames) >= 2)
        after = rt.events.publish("ws", "content", text="after")
        ws.wait_for(lambda frames: len(frames) >= 3)
        assert ws.ids() == [before, during, after]
    finally:
        proxy.close()


def test_a_redis_outage_longer_than_the_clients_own_retries_costs_the_relay_nothing(db, client, relay_for):
    proxy = RedisProxy(REDIS_HOST, REDIS_PORT)
    try:
        rt = runtime(client, maxlen=100)
        fanout = Fanout(redis.Redis.from_url(proxy.url(db), health_check_interval=30))
        ws = relay_for(rt, "ws", fanout.subscribe("ws"))
        ids = [rt.events.publish("ws", "content", text="before")]
        ws.wait_for(lambda frames: len(frames) == 1)
        proxy.cut()
        ids += [rt.events.publish("ws", "content", text=f"during {n}") for n in range(3)]
        deadline = time.monotonic() + 30
        while fanout._ready.is_set():  # the fan-out gave up on its connection and reconnects itself
            assert time.monotonic() < deadline, "the fan-out never noticed the outage"
            time.sleep(0.05)
        ids.append(rt.events.publish("ws", "content", text="still down"))
        proxy.restore()
        ws.wait_for(lambda frames: len(frames) >= 5, timeout=30)
        ids.append(rt.events.publish("ws", "content", text="after"))
        ws.wait_for(lambda frames: len(frames) >= 6)
        assert ws.ids() == ids
    finally:
        proxy.close()


def test_a_client_that_stops_reading_holds_a_bounded_queue_and_catches_up_from_the_log(client, relay_for):
    rt = runtime(client, maxlen=1000)
    fanout = Fanout(client, queue_events=8)
    live, marker = fanout.subscribe("slow"), fanout.subscribe("marker")
    ws = relay_for(rt, "slow", live)
    ids = [rt.events.publish("slow", "tool_output_chunk", text="first")]
    ws.wait_for(lambda frames: len(frames) == 1)  # live: the relay is past its first replay
    ws.reading.clear()
    ids += [rt.events.publish("slow", "tool_output_chunk", text="x" * 100) for _ in range(200)]
    assert ws.sending.wait(timeout=10)
    rt.events.publish("marker", "content")
    marker.get(timeout=10)  # the fan-out has offered all 200 to the stuck socket by now
    assert live.qsize() <= 8
    ws.reading.set()  # the client reads again
    ws.wait_for(lambda frames: len(frames) >= len(ids))
    assert ws.ids() == ids  # every event once, in order: the resync came from the log


def test_a_client_that_missed_more_than_the_log_keeps_is_told_to_reread(client, relay_for):
    rt = runtime(client, maxlen=20)
    fanout = Fanout(client, queue_events=8)
    live, marker = fanout.subscribe("slow"), fanout.subscribe("marker")
    ws = relay_for(rt, "slow", live)
    first = rt.events.publish("slow", "tool_output_chunk", text="first")
    ws.wait_for(lambda frames: len(frames) == 1)
    ws.reading.clear()
    ids = [rt.events.publish("slow", "tool_output_chunk", text=uuid.uuid4().hex) for _ in range(100)]
    assert ws.sending.wait(timeout=10)
    rt.events.publish("marker", "content")
    marker.get(timeout=10)
    assert live.qsize() <= 8
    ws.reading.set()
    ws.wait_for(lambda frames: frames[-1]["id"] == ids[-1])
    frames = ws.frames
    assert [f["id"] for f in frames[:2]] == [first, ids[0]]  # the second was being sent when it stalled
    assert frames[2]["type"] == "replay_truncated" and frames[2]["after"] == ids[0]
    assert [f["id"] for f in frames[3:]] == ids[-20:]
