"""A transition's events against a real Redis (a leased test database): they go out in order
with the release of the workstream's ordering lock, in one round trip after the lock's, and
keep every promise a publish makes (fences, no duplicate on a retry, a lock always let go)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from app import redis_keys
from app.engine.publishing import outbox
from app.engine.publishing.outbox import ordered, wait_for_order
from app.engine.subagents.relay import SUBAGENT_EVENT, FamilyEventLog, Link
from app.events import EventLog, Fence, ScriptCall
from tests.integration.services import REDIS_HOST, REDIS_PORT, lease_redis_db

pytestmark = pytest.mark.integration


class RoundTrips:
    """Counts the requests a client writes to Redis: redis-py writes a command, or a whole
    pipeline, at once and reads every reply before it writes again, so each is a round trip."""

    def __init__(self) -> None:
        self.count = 0
        self.client = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=self._connection_class(), host=REDIS_HOST, port=REDIS_PORT, db=lease_redis_db()
        ))  # fmt: skip

    def _connection_class(self) -> type[redis.Connection]:
        counter = self

        class Counting(redis.Connection):
            def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                counter.count += 1
                super().send_packed_command(command, check_health)

        return Counting


@pytest.fixture
def trips() -> Iterator[RoundTrips]:
    counted = RoundTrips()
    yield counted
    counted.client.flushdb()  # the lease goes with it


def runtime(client: redis.Redis, events: EventLog | None = None) -> Any:
    """What `ordered` uses of a runtime."""
    return SimpleNamespace(
        redis=client, waits_out_outages=True, events=events or EventLog(client, maxlen=100)
    )


def transition(rt: Any, ws_id: str, *texts: str, fence: Fence | None = None) -> None:
    with ordered(rt, ws_id) as box:
        for text in texts:
            box.add("content", turn_id="t", fence=fence, text=text)


def logged(rt: Any, ws_id: str) -> list[tuple[int, str]]:
    return [(e["id"], e.get("text") or e["type"]) for e in rt.events.replay(ws_id, 0)[0]]


def test_a_transition_sends_its_events_and_its_lock_release_in_one_round_trip(trips):
    rt = runtime(trips.client)
    transition(rt, "ws", "warm-up")  # the connection opened, the scripts loaded
    trips.count = 0
    transition(rt, "ws", "a", "b", "c")
    assert trips.count == 2  # the lock taken; then the events and the release
    events = logged(rt, "ws")
    first = events[1][0]
    assert events[1:] == [(first, "a"), (first + 1, "b"), (first + 2, "c")]
    assert not trips.client.exists(redis_keys.ws_order("ws"))


def test_a_childs_echoes_follow_its_events_in_one_more_round_trip(trips):
    events = FamilyEventLog(trips.client, maxlen=100)
    events.links = {"child": Link("parent", "parent-turn", "call-1")}.get
    rt = runtime(trips.client, events)
    transition(rt, "child", "warm-up")
    trips.count = 0
    transition(rt, "child", "a", "b", "c")
    assert trips.count == 3  # the lock; the child's events; their echoes and the release
    child = logged(rt, "child")[1:]
    echoes = rt.events.replay("parent", 0)[0][1:]
    assert [e["type"] for e in echoes] == [SUBAGENT_EVENT] * 3
    assert [(e["event"]["id"], e["event"]["text"]) for e in echoes] == child
    tags = {(e["call_id"], e["child_ws_id"], e["turn_id"]) for e in echoes}
    assert tags == {("call-1", "child", "parent-turn")}
    assert not trips.client.exists(redis_keys.ws_order("child"))


def test_a_claim_waiting_out_a_transition_wakes_as_its_events_go_out(trips, monkeypatch):
    """A step sent before the events of the transition that started it (`Outbox.on_commit`)
    waits for them on the workstream's log: woken by them, not by looking again and again."""
    monkeypatch.setattr(outbox, "ORDER_WAKE_SECONDS", 30.0)  # so only the events can wake it
    db = trips.client.connection_pool.connection_kwargs["db"]
    holder = runtime(redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=db))
    waiter = runtime(trips.client)
    transition(waiter, "ws", "warm-up")
    taken = threading.Event()

    def starter() -> None:
        with ordered(holder, "ws") as box:
            box.add("content", turn_id="t", text="thinking")
            taken.set()
            time.sleep(0.5)  # its transaction

    thread = threading.Thread(target=starter)
    thread.start()
    assert taken.wait(5)
    trips.count = 0
    wait_for_order(waiter, "ws")
    # The lock and the log's end looked at, the log read until the events came, the lock again
    # (half a second of looking every few milliseconds would be dozens of round trips).
    assert trips.count == 3
    assert logged(waiter, "ws")[-1][1] == "thinking"  # it returned once the events were out
    thread.join(5)


def test_a_deferred_transition_holds_its_lock_and_events_until_its_rest_is_run(trips):
    """A web request answers a send between its commit and its events (`defer`)."""
    rt = runtime(trips.client)
    rest: list[Any] = []
    with ordered(rt, "ws", defer=rest.append) as box:
        box.add("content", turn_id="t", text="announced")
        box.after(lambda _rt: rest.append("after"))
    assert logged(rt, "ws") == [] and trips.client.exists(redis_keys.ws_order("ws"))
    rest.pop(0)()
    assert [text for _id, text in logged(rt, "ws")] == ["announced"]
    assert not trips.client.exists(redis_keys.ws_order("ws")) and rest == ["after"]


def test_a_deferred_transition_that_rolled_back_lets_its_lock_go_at_once(trips):
    rt = runtime(trips.client)
    rest: list[Any] = []
    with pytest.raises(RuntimeError), ordered(rt, "ws", defer=rest.append) as box:
        box.add("content", turn_id="t", text="never")
        raise RuntimeError("the transaction failed")
    assert rest == [] and logged(rt, "ws") == [] and not trips.client.exists(redis_keys.ws_order("ws"))


def test_an_event_its_fence_refuses_is_dropped_and_the_others_go_out_in_order(trips):
    rt = runtime(trips.client)
    rt.events.set_fence(Fence("t", 2))
    with ordered(rt, "ws") as box:
        box.add("content", turn_id="t", text="before")
        box.add("content", turn_id="t", fence=Fence("t", 1), text="stale")
        box.add("content", turn_id="t", fence=Fence("t", 2), text="current")
    events = logged(rt, "ws")
    assert [text for _id, text in events] == ["before", "current"]
    assert events[1][0] == events[0][0] + 1  # consecutive: a relay sees no gap
    ids = rt.events.publish_many("ws", [box.events[1], box.events[2]])
    assert ids[0] is None and ids[1] == events[1][0] + 1


def test_a_reply_lost_after_the_events_went_out_does_not_send_them_twice(trips, caplog):
    rt = runtime(trips.client)
    original = rt.events._execute
    replies = []

    def lose_the_first_reply(calls):  # the transaction ran, then the connection dropped
        replies.append(original(calls))
        if len(replies) == 1:
            raise redis.ConnectionError("connection reset")
        return replies[-1]

    rt.events._execute = lose_the_first_reply
    with caplog.at_level(logging.WARNING, logger="app.engine.publishing.outbox"):
        transition(rt, "ws", "a", "b")
    first = logged(rt, "ws")[0][0]
    assert logged(rt, "ws") == [(first, "a"), (first + 1, "b")]
    assert replies[0][:2] == replies[1][:2] == [first, first + 1]  # the retry got the same ids
    assert not trips.client.exists(redis_keys.ws_order("ws"))
    assert "expired" not in caplog.text  # the lock the retry found gone was the one it released


def test_the_lock_is_let_go_when_an_event_cannot_be_sent(trips):
    rt = runtime(trips.client)
    with pytest.raises(TypeError), ordered(rt, "ws") as box:
        box.add("content", text="fine")
        box.add("content", text=object())  # not JSON
    assert not trips.client.exists(redis_keys.ws_order("ws"))
    assert logged(rt, "ws") == []  # nothing went out: the transition's events go together


def test_a_lock_that_expired_and_was_taken_is_left_to_its_new_holder(trips, caplog):
    rt = runtime(trips.client)
    with caplog.at_level(logging.WARNING, logger="app.engine.publishing.outbox"), ordered(rt, "ws") as box:
        box.add("content", text="late")
        trips.client.set(redis_keys.ws_order("ws"), "someone else's token")  # ours expired; theirs now
    assert trips.client.get(redis_keys.ws_order("ws")) == b"someone else's token"
    assert "ordering lock expired" in caplog.text
    assert [text for _id, text in logged(rt, "ws")] == ["late"]


@pytest.mark.parametrize("lost", ["every script", "the release only"])
def test_a_transition_goes_out_whole_after_redis_lost_its_scripts(trips, lost):
    rt = runtime(trips.client)
    transition(rt, "ws", "warm-up")
    trips.client.script_flush()  # as a restart does
    if lost == "the release only":
        rt.events.publish("other", "content")  # a single publish loads its own script again
    transition(rt, "ws", "a", "b", "c")
    first = logged(rt, "ws")[1][0]
    assert logged(rt, "ws")[1:] == [(first, "a"), (first + 1, "b"), (first + 2, "c")]
    assert not trips.client.exists(redis_keys.ws_order("ws"))


# KEYS: a key to record in, the workstream's counter: what the counter said when this ran
_RECORD_LAST_ID = "redis.call('SET', KEYS[1], redis.call('GET', KEYS[2]))"


@pytest.mark.parametrize("lost", [False, True], ids=["scripts loaded", "scripts lost"])
def test_a_transitions_other_scripts_run_after_its_events_in_their_round_trip(trips, lost):
    rt = runtime(trips.client)
    record = trips.client.register_script(_RECORD_LAST_ID)
    transition(rt, "ws", "warm-up")
    record(keys=["seen", redis_keys.event_seq("ws")])  # loaded
    if lost:
        trips.client.script_flush()  # as a restart does
    trips.count = 0
    with ordered(rt, "ws") as box:
        box.add("content", text="a")
        box.add("content", text="b")
        box.then.append(ScriptCall(record, ["seen", redis_keys.event_seq("ws")], []))
    sent_in = trips.count
    assert box.is_sent
    last = logged(rt, "ws")[-1]
    assert last[1] == "b" and int(trips.client.get("seen")) == last[0]  # after both events
    assert not trips.client.exists(redis_keys.ws_order("ws"))
    if not lost:
        assert sent_in == 2  # the lock; then the events, the script and the release
