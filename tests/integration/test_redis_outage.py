"""Redis outages as a running step meets them: publishes and the cancel flag ride out a short
outage, a cancel check never fails a step, and a Redis restarted empty neither silences a step nor
sends event ids backwards."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from app import keys
from app.engine.cancellation import CancelCheck, raise_flag
from app.events import EventLog, Fence
from app.settings import Settings
from tests.integration.redis_faults import PrivateRedisServer, RedisProxy
from tests.integration.services import REDIS_HOST, REDIS_PORT, lease_redis_db

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 2.0  # the outage of the fault-injection run


@pytest.fixture
def direct() -> Iterator[redis.Redis]:
    """A leased database on the shared Redis, reached directly (the test's own view)."""
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=lease_redis_db())
    yield client
    client.flushdb()  # the lease goes with it


@pytest.fixture
def proxy() -> Iterator[RedisProxy]:
    p = RedisProxy(REDIS_HOST, REDIS_PORT)
    yield p
    p.close()


def runtime(client: redis.Redis, retry_seconds: float = 30.0) -> Any:
    """What a worker holds, as far as events and cancel checks go."""
    settings = Settings(redis_retry_seconds=retry_seconds)
    return SimpleNamespace(redis=client, settings=settings, events=EventLog.from_settings(client, settings))


def through(proxy: RedisProxy, direct: redis.Redis) -> redis.Redis:
    """A client configured as the service's own (app/runtime.py), connected through the proxy."""
    db = direct.connection_pool.connection_kwargs["db"]
    return redis.Redis.from_url(proxy.url(db), health_check_interval=30)


def outage(proxy: RedisProxy, seconds: float = OUTAGE_SECONDS) -> threading.Timer:
    proxy.cut()
    timer = threading.Timer(seconds, proxy.restore)
    timer.start()
    return timer


def test_a_publish_rides_out_a_short_outage(proxy, direct):
    rt = runtime(through(proxy, direct))
    first = rt.events.publish("ws", "content", text="before")
    started = time.monotonic()
    outage(proxy)
    during = rt.events.publish("ws", "tool_result", call_id="c", output="done", is_error=False)
    assert time.monotonic() - started >= OUTAGE_SECONDS * 0.9  # it waited for Redis, then went out
    assert during == first + 1
    assert [e["type"] for e in rt.events.replay("ws", 0)[0]] == ["content", "tool_result"]


def test_a_publish_gives_up_after_its_bound(proxy, direct):
    rt = runtime(through(proxy, direct), retry_seconds=0.5)
    rt.events.publish("ws", "content")
    proxy.cut()
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        rt.events.publish("ws", "content")
    assert 0.3 < time.monotonic() - started < 5


def test_a_cancel_check_during_an_outage_says_not_cancelled_and_sees_a_cancel_after_it(proxy, direct, caplog):
    rt = runtime(through(proxy, direct))
    check = CancelCheck(rt, "turn")
    assert check() is False
    proxy.cut()
    with caplog.at_level(logging.WARNING, logger="app.engine.cancellation"):
        for _ in range(3):
            time.sleep(0.06)  # past the check interval: each call asks Redis
            assert check() is False
    assert caplog.text.count("cannot check the cancel flag") == 1
    direct.set(keys.turn_cancel("turn"), 1)  # cancelled through a web node that still reaches Redis
    proxy.restore()
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the cancel was never seen"
        time.sleep(0.06)


def test_raising_the_cancel_flag_rides_out_a_short_outage(proxy, direct):
    rt = runtime(through(proxy, direct))
    rt.redis.ping()
    outage(proxy)
    raise_flag(rt, "turn")
    assert direct.exists(keys.turn_cancel("turn"))


def test_after_redis_restarts_empty_a_running_step_still_publishes_with_higher_ids():
    server = PrivateRedisServer()
    server.start()
    try:
        rt = runtime(redis.Redis.from_url(server.url, health_check_interval=30))
        fence = Fence("turn", 2)
        rt.events.set_fence(fence)
        before = [rt.events.publish("ws", "content", fence=fence, text=str(n)) for n in range(3)]
        server.stop()
        server.restart_later(OUTAGE_SECONDS)  # back after the outage, with nothing in it
        end = rt.events.publish("ws", "state_change", state="idle", fence=fence)
        assert end is not None and end > before[-1]  # the step's end still goes out, after its events
        assert rt.events.last_id("ws") == end  # what the history endpoint returns as last_event_id
        events, truncated = rt.events.replay("ws", after=before[-1])
        assert truncated and [e["id"] for e in events] == [end]  # a client at `before` must re-read
        assert rt.events.replay("ws", after=0) == (events, False)
    finally:
        server.stop()
