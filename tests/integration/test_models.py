"""Both wire formats through the whole service, and the beat-driven approval time-out."""

from __future__ import annotations

import time

import pytest

from app.engine.running import sweeper
from app.runtime import Runtime
from app.settings import Settings, ToolSettings
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def test_an_anthropic_model_streams_and_calls_tools(api, model, open_socket, workdir):
    ws_id = api.create_workstream(model="claude", working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo from-claude"})]))
    model.enqueue(Reply(chunks=["Claude ", "saw it"]))
    turn_id = api.send(ws_id, "hello claude")
    sock.wait_turn_end(turn_id)
    assert sock.wait_type("tool_result")["output"] == "from-claude"
    assert "".join(e["text"] for e in sock.of_type("content")) == "Claude saw it"
    last = model.history[-1]
    assert last.path.endswith("/messages") and last.body["model"] == "fake-claude"
    tool_result = last.body["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["content"] == "from-claude"


def test_a_workers_model_steps_reuse_its_connection_to_the_model_server(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo one"})]))
    model.enqueue(Reply(text="ran it"))
    model.enqueue(Reply(text="and again"))
    asked = len(model.history)
    sock.wait_turn_end(api.send(ws_id, "run it"))
    sock.wait_turn_end(api.send(ws_id, "once more"))
    steps = model.history[asked:]
    assert len(steps) == 3
    # Kept alive between steps and turns, as with a real model server: no connect per request.
    assert len({r.peer for r in steps}) == 1, [r.peer for r in steps]


def test_a_model_without_a_key_ends_the_turn_with_what_to_set(api, model, open_socket, workdir):
    ws_id = api.create_workstream(model="keyless", working_dir=str(workdir))
    sock = open_socket(ws_id)
    turn_id = api.send(ws_id, "anyone?")
    error = sock.wait_type("error", turn_id=turn_id, timeout=15)
    assert "ANTHROPIC_API_KEY" in error["message"]
    assert sock.wait_turn_end(turn_id)["state"] == "error"
    assert api.workstream(ws_id)["state"] == "error"
    assert not [r for r in model.history if "anyone?" in str(r.body)]  # nothing was sent


def test_approval_time_out_denies_with_the_reason(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "touch never"})]))
    model.enqueue(Reply(text="nobody answered"))
    turn_id = api.send(ws_id, "wait")
    sock.wait_type("approve_request")
    # The sweep beat runs, with a one-second limit instead of the service's "wait for ever".
    settings = Settings.load(services.env)
    rt = Runtime.create(settings.with_changes(tools=ToolSettings(approval_timeout_seconds=1)))
    try:
        sweeper.time_out_approvals(rt)
        assert sock.of_type("approval_resolved") == []  # not yet due
        time.sleep(1.2)
        sweeper.time_out_approvals(rt)
    finally:
        rt.close()
    resolved = sock.wait_type("approval_resolved")
    assert resolved["by"] == "timeout" and resolved["how"] == "timeout"
    sock.wait_turn_end(turn_id)
    assert sock.wait_type("tool_result")["output"] == "Denied by user: Approval timed out after 1 s"
    assert not (workdir / "never").exists()


def test_cancel_while_the_model_asks_to_wait_ends_the_turn_at_once(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(status=503, error_message="busy, come back later", retry_after=20))
    turn_id = api.send(ws_id, "are you busy?")
    assert model.wait_for_requests(1, timeout=15)  # the worker is now waiting to try again
    cancelled_at = time.monotonic()
    assert api.cancel(ws_id).status_code == 202
    sock.wait_turn_end(turn_id, timeout=10)
    assert time.monotonic() - cancelled_at < 3  # not the 20 s the server asked for
    assert sock.of_type("error") == []  # a cancel, not a failure
    assert len(model.history) == 1  # and no other try
    model.enqueue(Reply(text="all yours"))
    next_turn = api.send(ws_id, "now?")
    assert sock.wait_turn_end(next_turn)["state"] == "idle"
    assert api.history(ws_id)[-1]["content"] == "all yours"


@pytest.mark.parametrize("workstream_model", [None, "claude"])
def test_a_stream_that_breaks_mid_answer_is_asked_again_and_the_turn_completes(
    api, model, open_socket, workdir, workstream_model
):
    ws_id = api.create_workstream(working_dir=str(workdir), model=workstream_model)
    sock = open_socket(ws_id)
    model.enqueue(Reply(chunks=["half ", "an ", "answer ", "then "], break_after=2))
    model.enqueue(Reply(chunks=["the ", "whole ", "answer"]))
    turn_id = api.send(ws_id, "go")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    restart = sock.wait_type("stream_end", discard=True)
    assert "broke off" in restart["reason"]
    after = [e["text"] for e in sock.events if e["id"] > restart["id"] and e["type"] == "content"]
    assert "".join(after) == "the whole answer"
    assert [m["content"] for m in api.history(ws_id)] == ["go", "the whole answer"]


def test_a_conversation_past_the_context_window_ends_with_what_to_do(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(context_window_exceeded=True))
    turn_id = api.send(ws_id, "one more thing")
    assert sock.wait_turn_end(turn_id)["state"] == "error"
    message = sock.wait_type("error", turn_id=turn_id)["message"]
    assert "context window" in message and "new workstream" in message
    assert len(model.history) == 1  # refused for good: not asked again
