"""The event stream as a client sees it through the running service when Redis loses a
workstream's events (it is told to re-read, and the history's cursor lets it go on with no gap)
and when it stops reading (it is caught up from the log, not buffered without bound)."""

from __future__ import annotations

import json
import socket

import pytest
import websocket

from app import keys
from app.events import EventLog
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration

SLOW_EVENTS = 4000  # 16 MB of output: more than the socket buffers, the live queue and the log hold


def test_a_client_learns_it_must_reread_when_redis_lost_the_events_and_misses_no_turn_end(
    api, model, open_socket, services, workdir
):
    ws_id = api.create_workstream(name="wiped", working_dir=str(workdir))
    watching = open_socket(ws_id)
    model.enqueue(Reply(text="first answer"))
    first = api.send(ws_id, "one")
    cursor = watching.wait_turn_end(first)["id"]

    # Redis loses the workstream's counter and log (restarted empty, flushed, evicted).
    services.redis.delete(keys.event_seq(ws_id), keys.event_meta(ws_id), keys.event_log(ws_id))
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
    services.redis.delete(keys.event_seq(ws_id), keys.event_meta(ws_id), keys.event_log(ws_id))

    returning = open_socket(ws_id, after=cursor)
    assert returning.wait_type("replay_truncated")["oldest"] is None
    end = returning.wait_turn_end(second, timeout=10)
    assert end["state"] == "idle" and end["current"] is True and end["id"] is None
    assert api.history(ws_id)[-1]["content"] == "while away"


def test_a_client_that_stops_reading_is_caught_up_from_the_log_not_buffered_without_bound(
    api, open_socket, services, workdir
):
    slow_ws = api.create_workstream(name="slow reader", working_dir=str(workdir))
    marker_ws = api.create_workstream(name="marker", working_dir=str(workdir))
    url = services.base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{slow_ws}?token={api.token}"
    # A small receive window: the server's send blocks soon after the client stops reading.
    small_window = ((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),)
    slow = websocket.create_connection(url, timeout=30, sockopt=small_window)
    marker = open_socket(marker_ws)
    log = EventLog(services.redis, maxlen=10_000)
    chunk = "x" * 4000
    ids = [log.publish(slow_ws, "tool_output_chunk", call_id="c", text=chunk) for _ in range(SLOW_EVENTS)]
    log.publish(marker_ws, "content", text="the fan-out has handed on every event before this one")
    marker.wait_type("content")

    frames = []
    while not frames or frames[-1].get("id") != ids[-1]:  # the client reads again
        frames.append(json.loads(slow.recv()))
    slow.close()
    notices = [n for n, f in enumerate(frames) if f["type"] == "replay_truncated"]
    assert len(notices) == 1, "a socket this far behind is resynced from the log"
    before, after = frames[: notices[0]], frames[notices[0] + 1 :]
    assert [f["id"] for f in before] == ids[: len(before)]  # what was sent before it fell behind
    assert frames[notices[0]]["oldest"] == after[0]["id"]
    assert [f["id"] for f in after] == ids[ids.index(after[0]["id"]) :]  # then the log, to the end
    assert len(frames) < len(ids)  # the rest was never queued for it
