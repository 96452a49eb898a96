"""The event stream as a client sees it when Redis loses a workstream's events, through the running
service: the client is told to re-read, and the history's cursor lets it go on with no gap."""

from __future__ import annotations

import pytest

from app import keys
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration


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
    later = watching.events[watching.events.index(notice) + 1 :]
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
