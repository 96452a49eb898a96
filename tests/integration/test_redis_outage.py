"""Redis outages as a running step meets them: publishes and the cancel flag ride out a short
outage, a cancel check never fails a step, a Redis restarted empty neither silences a step nor
sends event ids backwards, and a whole turn pauses through an outage instead of failing; and
as a client meets them: a send refused with a 503 to retry, over HTTP and the websocket."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from app import redis_keys
from app.engine.publishing.outbox import ordered
from app.engine.running.stop_check import CancelCheck, raise_flag
from app.events import EventLog, Fence
from app.settings import Settings
from app.web.faults import RETRY_AFTER_SECONDS, UNREACHABLE
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import Api, EventSocket
from tests.integration.redis_faults import PrivateRedisServer, RedisProxy
from tests.integration.services import API_TOKEN, REDIS_HOST, REDIS_PORT, Services, lease_redis_db

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 2.0  # the outage of the fault-injection run
LINES = [f"line{i}" for i in range(1, 9)]


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
    return SimpleNamespace(
        redis=client,
        waits_out_outages=True,
        settings=settings,
        events=EventLog.from_settings(client, settings),
    )


def through(proxy: RedisProxy, direct: redis.Redis) -> redis.Redis:
    """A client configured as the service's own (app/runtime.py), connected through the proxy."""
    db = direct.connection_pool.connection_kwargs["db"]
    return redis.Redis.from_url(proxy.url(db), health_check_interval=30)


def test_a_publish_rides_out_a_short_outage(proxy, direct):
    rt = runtime(through(proxy, direct))
    first = rt.events.publish("ws", "content", text="before")
    started = time.monotonic()
    proxy.cut_for(OUTAGE_SECONDS)
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
    assert 0.3 < time.monotonic() - started < 15  # bounded, with room for a loaded machine


def test_a_transitions_events_ride_out_a_short_outage_and_its_lock_is_let_go(proxy, direct, caplog):
    rt = runtime(through(proxy, direct))
    with caplog.at_level(logging.WARNING), ordered(rt, "ws") as box:
        box.add("content", text="a")
        box.add("content", text="b")
        proxy.cut_for(OUTAGE_SECONDS)  # after the lock was taken, before the events go
    assert [e["text"] for e in rt.events.replay("ws", 0)[0]] == ["a", "b"]
    assert not direct.exists(redis_keys.ws_order("ws"))
    assert "Redis is back" in caplog.text and "expired" not in caplog.text


def test_a_transition_that_meets_an_outage_before_its_lock_waits_for_redis_and_goes_on(proxy, direct, caplog):
    """The end of a phase (a command's result, an answer) must not be thrown away because Redis
    blinked as its transition began."""
    rt = runtime(through(proxy, direct))
    rt.redis.ping()
    proxy.cut_for(OUTAGE_SECONDS)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), ordered(rt, "ws") as box:
        box.add("tool_result", call_id="c", output="done", is_error=False)
    assert time.monotonic() - started >= OUTAGE_SECONDS * 0.9
    assert [e["output"] for e in rt.events.replay("ws", 0)[0]] == ["done"]
    assert not direct.exists(redis_keys.ws_order("ws"))
    assert "ordering lock: Redis is back" in caplog.text and "not had" not in caplog.text


def test_a_cancel_check_during_an_outage_says_not_cancelled_and_sees_a_cancel_after_it(proxy, direct, caplog):
    rt = runtime(through(proxy, direct))
    check = CancelCheck(rt, "turn")
    assert check() is False
    proxy.cut()
    with caplog.at_level(logging.WARNING, logger="app.engine.running.stop_check"):
        for _ in range(3):
            time.sleep(0.06)  # past the check interval: each call asks Redis
            assert check() is False
    assert caplog.text.count("cannot check the cancel flag") == 1
    direct.set(redis_keys.turn_cancel("turn"), 1)  # cancelled through a web node that still reaches Redis
    proxy.restore()
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the cancel was never seen"
        time.sleep(0.06)


def test_raising_the_cancel_flag_rides_out_a_short_outage(proxy, direct):
    rt = runtime(through(proxy, direct))
    rt.redis.ping()
    proxy.cut_for(OUTAGE_SECONDS)
    raise_flag(rt, "turn")
    assert direct.exists(redis_keys.turn_cancel("turn"))


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
        server.discard()


@contextmanager
def behind_a_proxy(model_server: Any, tmp: Path) -> Iterator[tuple[Services, RedisProxy]]:
    """The whole service (web, worker, beat) started with Redis reached through a proxy the test
    can cut, as over a network; stopped, and the fake model reset, at the end."""
    svc = Services("sqlite", tmp, model_server.openai_base_url)
    proxy = RedisProxy(REDIS_HOST, REDIS_PORT)
    svc.env["REDIS_URL"] = proxy.url(svc.redis.connection_pool.connection_kwargs["db"])
    model_server.reset()
    try:
        svc.start()
        yield svc, proxy
    finally:
        proxy.close()
        svc.stop()
        model_server.reset()


@pytest.fixture(scope="module")
def outage_mid_command(model_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A turn whose bash command meets a 2 s Redis outage; the whole service (web, worker, beat)
    reaches Redis through the proxy, as over a network. What a user saw, once the dust settled."""
    with behind_a_proxy(model_server, tmp_path_factory.mktemp("outage")) as (svc, proxy):
        api = Api(svc.base_url, API_TOKEN)
        ws_id = api.create_workstream(working_dir=str(svc.workdir), auto_approve=True)
        sock = EventSocket(svc.base_url, API_TOKEN, ws_id)
        command = f"for l in {' '.join(LINES)}; do echo $l; sleep 0.5; done"
        model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
        model_server.enqueue(Reply(text="all lines printed"))
        turn_id = api.send(ws_id, "print the lines")
        sock.wait_for(lambda e: e["type"] == "tool_output_chunk" and "line1" in e["text"])
        proxy.cut_for(OUTAGE_SECONDS)
        result = sock.wait_type("tool_result", timeout=60)
        try:
            end: dict[str, Any] | None = sock.wait_turn_end(turn_id, timeout=30)
        except AssertionError:
            end = None
        yield {"result": result, "end": end, "events": list(sock.events), "history": api.history(ws_id)}
        sock.close()


def test_a_two_second_outage_mid_command_leaves_the_command_running_and_its_result_whole(outage_mid_command):
    result = outage_mid_command["result"]
    assert result["is_error"] is False and result["output"].split() == LINES
    tool_messages = [m for m in outage_mid_command["history"] if m["role"] == "tool"]
    assert [m["content"].split() for m in tool_messages] == [LINES]
    ids = [e["id"] for e in outage_mid_command["events"]]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # the open socket: no gap, no duplicate


def test_a_two_second_outage_mid_command_costs_the_turn_only_a_pause(outage_mid_command):
    end = outage_mid_command["end"]
    assert end is not None and end["state"] == "idle"
    assert outage_mid_command["history"][-1]["content"] == "all lines printed"


def test_a_send_during_an_outage_is_a_503_to_retry_over_http_and_the_websocket(model_server, tmp_path):
    with behind_a_proxy(model_server, tmp_path) as (svc, proxy):
        api = Api(svc.base_url, API_TOKEN)
        ws_id = api.create_workstream(working_dir=str(svc.workdir))
        sock = EventSocket(svc.base_url, API_TOKEN, ws_id)
        proxy.cut()
        try:
            refused = api.http.post(
                f"/v1/api/workstreams/{ws_id}/send",
                json={"message": "hello"},
                headers={"Idempotency-Key": "k"},
            )
            assert refused.status_code == 503, refused.text
            assert refused.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
            assert refused.json() == {"error": UNREACHABLE}
            sock.send({"type": "send", "message": "hello", "idempotency_key": "k", "request_id": 1})
            reply = sock.wait_reply(timeout=30)
            assert (reply["request_id"], reply["status"], reply["body"]) == (1, 503, {"error": UNREACHABLE})
        finally:
            proxy.restore()
        model_server.enqueue(Reply(text="hello back"))
        sock.send({"type": "send", "message": "hello", "idempotency_key": "k", "request_id": 2})
        reply = sock.wait_reply(timeout=30)  # the same socket, still open: the retry goes through
        assert (reply["request_id"], reply["status"]) == (2, 202)
        assert sock.wait_turn_end(reply["body"]["turn_id"])["state"] == "idle"
        history = api.history(ws_id)
        assert [(m["role"], m["content"]) for m in history] == [
            ("user", "hello"),
            ("assistant", "hello back"),
        ]
        sock.close()


def test_the_same_worker_serves_turns_after_each_of_five_broker_link_drops(model_server, tmp_path):
    """A worker whose link drops while it holds an unacknowledged task (a command running)
    must reconnect, not exit: Celery 5.7 with kombu's Redis transport exited here, in 3 of 4
    outages of the chaos probe (app/broker.py says why)."""
    with behind_a_proxy(model_server, tmp_path) as (svc, proxy):
        api = Api(svc.base_url, API_TOKEN)
        worker = svc.processes["worker"]
        ws_id = api.create_workstream(working_dir=str(svc.workdir), auto_approve=True)
        for drop in range(5):
            command = f"sleep 2; echo done {drop}"
            model_server.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
            model_server.enqueue(Reply(text=f"answer {drop}"))
            api.send(ws_id, f"question {drop}")
            time.sleep(1.0)  # the batch's task is taken and not yet acknowledged
            proxy.cut_for(1.0)
            assert api.wait_idle(ws_id, timeout=90)["state"] == "idle"
            assert worker.poll() is None, f"the worker exited after link drop {drop + 1}"
            history = api.history(ws_id)
            assert history[-1]["content"] == f"answer {drop}"
            assert history[-2]["content"].strip() == f"done {drop}"
        assert "Unrecoverable error" not in (svc.tmp / "worker.log").read_text()
