"""How a model step's stream ends, run in-process against a real database (SQLite and PostgreSQL),
a real Redis and the fake model server: what history's cursor says while the answer streams and
after, the order a client reads the step's events in, and the round trips the step makes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from app import redis_keys
from app.engine.conversation import stored
from app.engine.life import turns, workstreams
from app.engine.publishing.streaming import history_cursor
from app.engine.running import model_step, stop_check
from app.runtime import Runtime
from app.storage.models import Turn, TurnStatus
from tests.fakes.model_server import Reply
from tests.integration.storage import runtime

pytestmark = pytest.mark.integration

MCP_STATUS = b"turnstone:mcp:status:"  # the published MCP catalog, read at most once a second


@pytest.fixture(params=["sqlite", "postgresql"])
def rt(request, tmp_path, model_server) -> Iterator[Runtime]:
    yield from runtime(request.param, tmp_path, model_server)


@pytest.fixture
def round_trips(monkeypatch) -> list[bytes]:
    """What this process writes to Redis from here on, one entry per round trip: redis-py
    writes a command, or a whole pipeline, at once and reads every reply before it writes again."""
    sent: list[bytes] = []
    send = redis.Connection.send_packed_command

    def recorded(conn: redis.Connection, command: Any, *args: Any, **kwargs: Any) -> None:
        parts = [command] if isinstance(command, (bytes, str)) else command
        sent.append(b"".join(p.encode() if isinstance(p, str) else bytes(p) for p in parts))
        send(conn, command, *args, **kwargs)

    monkeypatch.setattr(redis.Connection, "send_packed_command", recorded)
    return sent


def new_turn(rt: Runtime, name: str) -> tuple[str, str]:
    ws = workstreams.create(rt, name=name)
    return ws.id, turns.send(rt, ws.id, "hi").id


def status(rt: Runtime, turn_id: str) -> TurnStatus:
    with rt.db.reader() as s:
        turn = s.get(Turn, turn_id)
        assert turn is not None
        return TurnStatus(turn.status)


def logged(rt: Runtime, ws_id: str, after: int = 0) -> list[dict[str, Any]]:
    return rt.events.replay(ws_id, after)[0]


def kinds(rt: Runtime, ws_id: str) -> list[str]:
    """The types of the workstream's events after the turn's start, a run of deltas as one."""
    types = [e["type"] for e in logged(rt, ws_id)][2:]
    return [t for i, t in enumerate(types) if t != "content" or types[i - 1 : i] != ["content"]]


def warm_up(rt: Runtime, model_server: Any) -> None:
    """A first turn: the connections are open and Redis holds the scripts."""
    _ws_id, turn_id = new_turn(rt, "warm-up")
    model_server.enqueue(Reply(text="warm"))
    model_step.run(rt, turn_id, 0)


def test_history_read_while_an_answer_streams_points_before_its_deltas_and_after_it_once_stored(
    rt, model_server
):
    ws_id, turn_id = new_turn(rt, "cursor")
    before = logged(rt, ws_id)[-1]["id"]
    chunks = [f"part{i} " for i in range(6)]
    model_server.enqueue(Reply(chunks=chunks, chunk_delay=0.1))
    step = threading.Thread(target=model_step.run, args=(rt, turn_id, 0))
    step.start()
    deadline = time.monotonic() + 10
    while not [e for e in logged(rt, ws_id, before) if e["type"] == "content"]:
        assert time.monotonic() < deadline, "no delta was published"
        time.sleep(0.01)
    page = stored.history(rt, ws_id)  # as GET .../history reads it, mid-stream
    assert [m["role"] for m in page["messages"]] == ["user"]
    assert page["last_event_id"] == before  # the last event before the answer's first delta
    step.join(10)
    assert status(rt, turn_id) == TurnStatus.DONE
    replayed = logged(rt, ws_id, page["last_event_id"])
    assert "".join(e["text"] for e in replayed if e["type"] == "content") == "".join(chunks)
    assert [e["type"] for e in replayed if e["type"] != "content"] == ["stream_end", "state_change"]
    page = stored.history(rt, ws_id)
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"]
    assert page["last_event_id"] == logged(rt, ws_id)[-1]["id"]  # the mark is gone with the step
    assert not rt.redis.exists(redis_keys.stream_from(ws_id))


def test_a_steps_stream_end_goes_out_with_the_events_that_store_its_answer(
    rt, model_server, round_trips, monkeypatch
):
    monkeypatch.setattr(stop_check, "CHECK_EVERY_SECONDS", 60.0)  # however slow the machine
    warm_up(rt, model_server)
    ws_id, turn_id = new_turn(rt, "plain")
    model_server.enqueue(Reply(text="done"))
    round_trips.clear()
    model_step.run(rt, turn_id, 0)
    trips = [t for t in round_trips if MCP_STATUS not in t]
    events = logged(rt, ws_id)
    assert [(e["type"], e.get("state")) for e in events] == [
        ("message", None),
        ("state_change", "thinking"),
        ("content", None),
        ("stream_end", None),
        ("state_change", "idle"),
    ]
    assert events[3]["usage"] is not None and events[3]["step"] == 0
    assert history_cursor(rt, ws_id) == events[-1]["id"]
    [end] = [t for t in trips if b"stream_end" in t]
    # one MULTI/EXEC: the stream_end, the turn's end, the mark's clearing, the lock's release
    assert b'"state_change"' in end and redis_keys.stream_from(ws_id).encode() in end
    assert redis_keys.ws_order(ws_id).encode() in end
    # the claim's fence, the mark, the delta, the ordering lock; then that one
    assert len(trips) == 5


def test_a_step_whose_answer_cannot_be_stored_still_ends_its_stream_before_the_error(
    rt, model_server, monkeypatch
):
    ws_id, turn_id = new_turn(rt, "bug")
    model_server.enqueue(Reply(text="an answer"))

    def a_bug(*args: Any) -> None:
        raise ValueError("a bug in storing the answer")

    monkeypatch.setattr(model_step, "_found", a_bug)  # inside the answer's transaction
    model_step.run(rt, turn_id, 0)
    assert status(rt, turn_id) == TurnStatus.ERROR
    assert kinds(rt, ws_id) == ["content", "stream_end", "error", "state_change"]
    assert history_cursor(rt, ws_id) == logged(rt, ws_id)[-1]["id"]  # the mark cleared all the same


def test_a_model_error_ends_the_stream_then_the_turn(rt, model_server):
    ws_id, turn_id = new_turn(rt, "model error")
    model_server.enqueue(Reply(status=400, error_message="no such model"))
    model_step.run(rt, turn_id, 0)
    events = logged(rt, ws_id)
    assert kinds(rt, ws_id) == ["stream_end", "error", "state_change"]
    assert "no such model" in events[3]["message"]
    assert not rt.redis.exists(redis_keys.stream_from(ws_id))


def test_a_step_ends_its_stream_after_redis_lost_its_scripts(rt, model_server, monkeypatch):
    warm_up(rt, model_server)
    ws_id, turn_id = new_turn(rt, "scripts lost")
    model_server.enqueue(Reply(chunks=["a", "b"]))
    prepare_all = model_step._prepare_all

    def redis_restarts_now(*args: Any) -> Any:  # the answer streamed; it is about to be stored
        rt.redis.script_flush()
        return prepare_all(*args)

    monkeypatch.setattr(model_step, "_prepare_all", redis_restarts_now)
    model_step.run(rt, turn_id, 0)
    assert status(rt, turn_id) == TurnStatus.DONE
    assert kinds(rt, ws_id) == ["content", "stream_end", "state_change"]
    assert not rt.redis.exists(redis_keys.stream_from(ws_id))
