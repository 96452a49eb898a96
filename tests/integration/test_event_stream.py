"""The event stream as a client sees it through the running service when Redis loses a
workstream's events (it is told to re-read, and the history's cursor lets it go on with no gap)
and when it stops reading (it is caught up from the log, not buffered without bound)."""

from __future__ import annotations

import json
import socket

import pytest
import websocket

from app import redis_keys
from app.events import EventLog
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration

SLOW_EVENTS = 4000  # 16 MB of output: more than a socket may queue and the log holds


def test_a_client_learns_it_must_reread_when_redis_lost_the_events_and_misses_no_turn_end(
    api, model, open_socket, services, workdir
):
    ws_id = api.create_workstream(name="wiped", working_dir=str(workdir))
    watching = open_socket(ws_id)
    model.enqueue(Reply(text="first answer"))
    first = api.send(ws_id, "one")
    cursor = watching.wait_turn_end(first)["id"]

    # Redis loses the workstream's counter and log (restarted empty, flushed, evicted).
    services.redis.delete(
        redis_keys.event_seq(ws_id), redis_keys.event_meta(ws_id), redis_keys.event_log(ws_id)
    )
    model.enqueue(Reply(text="second answer"))
    second = api.send(ws_id, "two")

    # A client still connected is told, then sees the new turn whole, ids still increasing.
    notice = watching.wait_type("replay_truncated")
    end = watching.wait_turn_end(second)
    later = [e for e in watching.events[watching.events.index(notice) + 1 :] if e["id"] is not None]
    assert later[0]["type"] == "message" and later[0]["turn_id"] == second
    assert all(e["id"] > cursor for e in later) and end["id"] > cursor
    assert "".join(e["text"] for e in later if e["type"] == "content") == "second answer"

    # A client that reconnects with its old cursor is told first.
    returning = open_socket(ws_id, after=cursor)
    assert returning.wait_for(lambda e: True)["type"] == "replay_truncated"

    # Re-reading the history gives a cursor from which the next turn arrives whole.
    r = api.http.get(f"/v1/api/workstreams/{ws_id}/history")
    assert r.status_code == 200
    assert [m["content"] for m in r.json()["messages"]] == ["one", "first answer", "two", "second answer"]
    assert r.json()["last_event_id"] == end["id"]
    resumed = open_socket(ws_id, after=r.json()["last_event_id"])
    model.enqueue(Reply(text="third answer"))
    third = api.send(ws_id, "three")
    resumed.wait_turn_end(third)
    assert resumed.events[0]["type"] == "message" and resumed.events[0]["turn_id"] == third
    assert not resumed.of_type("replay_truncated")
    ids = [e["id"] for e in resumed.events]
    assert ids == list(range(end["id"] + 1, end["id"] + 1 + len(ids)))


def test_a_client_back_after_redis_lost_everything_is_told_the_turn_it_waits_for_has_ended(
    api, model, open_socket, services, workdir
):
    """Its turn ended while it was away and Redis then lost the workstream's events (a wipe):
    the log cannot replay the end, so the stream says where the workstream stands now."""
    ws_id = api.create_workstream(name="wiped-away", working_dir=str(workdir))
    watching = open_socket(ws_id)
    model.enqueue(Reply(text="before"))
    cursor = watching.wait_turn_end(api.send(ws_id, "first"))["id"]
    watching.close()
    model.enqueue(Reply(text="while away"))
    second = api.send(ws_id, "second")
    api.wait_idle(ws_id)
    services.redis.delete(
        redis_keys.event_seq(ws_id), redis_keys.event_meta(ws_id), redis_keys.event_log(ws_id)
    )

    returning = open_socket(ws_id, after=cursor)
    assert returning.wait_type("replay_truncated")["oldest"] is None
    end = returning.wait_turn_end(second, timeout=10)
    assert end["state"] == "idle" and end["current"] is True and end["id"] is None
    assert api.history(ws_id)[-1]["content"] == "while away"


def test_a_client_that_stops_reading_is_closed_past_the_unsent_bound_and_resumes_with_after(
    api, open_socket, services, workdir
):
    """What a socket may hold for a client that does not read is bounded (8 MiB by default): past
    it the client, once it reads again, gets what was queued in order and then a close with code
    4000; reconnecting with `after` it misses nothing the log still holds."""
    slow_ws = api.create_workstream(name="slow reader", working_dir=str(workdir))
    marker_ws = api.create_workstream(name="marker", working_dir=str(workdir))
    url = services.base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{slow_ws}?token={api.token}"
    # A small receive window: what the server sends piles up on its side soon after the client stops reading.
    small_window = ((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),)
    slow = websocket.create_connection(url, timeout=30, sockopt=small_window)
    marker = open_socket(marker_ws)
    log = EventLog(services.redis, maxlen=10_000)
    chunk = "x" * 4000
    ids = [log.publish(slow_ws, "tool_output_chunk", call_id="c", text=chunk) for _ in range(SLOW_EVENTS)]
    log.publish(marker_ws, "content", text="every event before this one has been handed on")
    marker.wait_type("content")

    frames, code = [], None
    while code is None:  # the client reads again
        opcode, frame = slow.recv_data_frame(True)
        if opcode == websocket.ABNF.OPCODE_TEXT:
            frames.append(json.loads(frame.data))
        elif opcode == websocket.ABNF.OPCODE_CLOSE:
            code = int.from_bytes(frame.data[:2], "big")
    assert code == 4000  # too far behind: reconnect with after
    got = [f["id"] for f in frames]
    assert got == ids[: len(got)] and 0 < len(got) < len(ids)  # in order, and the rest never queued
    assert len(got) * len(chunk) < 2 * 8 * 1024 * 1024  # the bound, and what the kernel buffers held

    again = websocket.create_connection(url + f"&after={got[-1]}", timeout=30)
    rest: list[dict] = []
    while not rest or rest[-1].get("id") != ids[-1]:
        rest.append(json.loads(again.recv()))
    again.close()
    if rest[0]["type"] == "replay_truncated":  # the log keeps 8 MiB: it may have let the oldest go
        rest = [f for f in rest[1:] if f["type"] != "state_change" or f["id"] is not None]
    assert [f["id"] for f in rest] == ids[ids.index(rest[0]["id"]) :]
