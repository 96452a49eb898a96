"""What history and the stored conversation promise API clients, through the running service."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def test_history_then_replay_after_its_cursor_misses_nothing_of_a_streaming_answer(
    api, model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir))
    watcher = open_socket(ws_id)
    chunks = [f"part{i} " for i in range(30)]
    model.enqueue(Reply(chunks=chunks, chunk_delay=0.05))
    turn_id = api.send(ws_id, "stream slowly")
    watcher.wait_type("content")  # the answer is streaming and not yet stored
    body = api.http.get(f"/v1/api/workstreams/{ws_id}/history").json()
    assert [m["role"] for m in body["messages"]] == ["user"]
    late = open_socket(ws_id, after=body["last_event_id"])
    late.wait_turn_end(turn_id)
    text = "".join(e["text"] for e in late.events if e["type"] == "content" and e["turn_id"] == turn_id)
    assert text == "".join(chunks)


def test_a_command_printing_nul_bytes_is_stored_and_the_turn_goes_on(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", "printf 'a\\0b\\n'", id="n1")]))
    model.enqueue(Reply(text="printed"))
    turn_id = api.send(ws_id, "print a NUL")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    results = [m for m in api.history(ws_id) if m["role"] == "tool"]
    assert results[0]["content"] == "a\\x00b"  # escaped: PostgreSQL stores no NUL
    assert api.history(ws_id)[-1]["content"] == "printed"
