"""One socket's relay (app/web/sockets/follower.py) against a real Redis log: a live event that
skips ids, or arrives while the log is being read, costs no gap and no duplicate; a log that
cannot be read for a while is read again, and the socket stays open meanwhile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from app.events import EventLog
from app.settings import Settings
from app.web.sockets import follower as follower_module
from app.web.sockets.connection import text_frame
from app.web.sockets.follower import Follower
from app.web.websocket import Work
from tests.apart import run_apart
from tests.integration.redis_faults import RedisProxy
from tests.integration.services import REDIS_HOST, REDIS_PORT, lease_redis_db

pytestmark = pytest.mark.integration


class RecordingConnection:
    """Stands in for a socket's connection: keeps every frame it is sent."""

    closed = False

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def send_text(self, text: str) -> None:
        self.frames.append(json.loads(text))

    def send_frame(self, frame: bytes) -> None:  # a server's text frame: a header, then the text
        size = frame[1] & 0x7F
        start = 2 if size < 126 else 4 if size == 126 else 10
        self.send_text(frame[start:].decode())

    def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed = True

    def ids(self) -> list[int | None]:
        return [f["id"] for f in self.frames]


@pytest.fixture
def db() -> Iterator[int]:
    number = lease_redis_db()
    yield number
    redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number).flushdb()  # the lease goes with it


def work_on(client: redis.Redis) -> Work:
    rt = SimpleNamespace(redis=client, events=EventLog(client, maxlen=100), settings=Settings())
    return Work(rt)  # type: ignore[arg-type]


def follower_of(work: Work, conn: RecordingConnection, after: int = 0) -> Follower:
    async def replay(ws_id: str, cursor: int) -> tuple[list[str], int, bool]:
        return await asyncio.get_running_loop().run_in_executor(None, work.replay, ws_id, cursor)

    return Follower("ws", after, conn, replay)  # type: ignore[arg-type]


async def settled(follower: Follower) -> None:
    for _ in range(200):
        await asyncio.sleep(0.02)
        if not follower._reading:
            return
    raise AssertionError("the relay is still reading the log")


def test_a_live_event_that_skips_ids_makes_the_relay_read_what_it_skipped(db):
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    work, conn = work_on(client), RecordingConnection()
    log = work.rt.events
    first = [log.publish("ws", "content", text=str(n)) for n in range(2)]

    async def run() -> list[int]:
        relay = follower_of(work, conn)
        relay.catch_up()
        await settled(relay)
        later = [log.publish("ws", "content", text=str(n)) for n in range(2, 4)]
        # Live delivery lost the third event on its way: only the fourth arrives.
        fourth = log.replay("ws", later[0])[0][0]
        relay.deliver(fourth, text_frame(json.dumps(fourth)))
        await settled(relay)
        relay.deliver(fourth, text_frame(json.dumps(fourth)))  # and again: already sent, so dropped
        return later

    later = run_apart(run())
    assert conn.ids() == first + later


def test_live_events_that_arrive_while_the_log_is_read_are_sent_once_in_order(db):
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
    work, conn = work_on(client), RecordingConnection()
    log = work.rt.events
    ids = [log.publish("ws", "content", text=str(n)) for n in range(3)]

    async def run() -> None:
        relay = follower_of(work, conn)
        relay.catch_up()  # reading; meanwhile two more are published and arrive live
        for n in range(3, 5):
            ids.append(log.publish("ws", "content", text=str(n)))
            event = log.replay("ws", ids[-2])[0][0]
            relay.deliver(event, text_frame(json.dumps(event)))
        await settled(relay)
        ids.append(log.publish("ws", "content", text="5"))
        event = log.replay("ws", ids[-2])[0][0]
        relay.deliver(event, text_frame(json.dumps(event)))

    run_apart(run())
    assert conn.ids() == ids


def test_a_log_that_cannot_be_read_is_read_again_once_redis_answers(db, monkeypatch):
    proxy = RedisProxy(REDIS_HOST, REDIS_PORT)
    monkeypatch.setattr(follower_module, "REPLAY_RETRY_SECONDS", 0.1)
    try:
        direct = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db)
        through = redis.Redis.from_url(proxy.url(db), socket_timeout=1, socket_connect_timeout=1)
        work, conn = work_on(through), RecordingConnection()
        ids = [EventLog(direct, maxlen=100).publish("ws", "content", text=str(n)) for n in range(3)]

        async def run() -> None:
            proxy.cut()
            relay = follower_of(work, conn)
            relay.catch_up()
            await asyncio.sleep(1.5)  # several reads fail meanwhile
            assert conn.frames == [] and not conn.closed  # an outage is a pause
            proxy.restore()
            await settled(relay)

        run_apart(run())
        assert conn.ids() == ids
    finally:
        proxy.close()
