"""Fallback chains through the running service (docs/providers.md, Fallback chains): an OpenAI
model whose server breaks mid-stream hands the step to its Anthropic fallback, with the same
conversation and tools; the switch is an event and the answer records which model gave it; a
chain whose every model fails ends the turn with an error naming each."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def test_a_broken_stream_moves_the_step_to_the_fallback_with_its_tools(
    api, model, backup_model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), model="chained", auto_approve=True)
    sock = open_socket(ws_id)
    backup_model.enqueue(Reply(text="half of an answer that breaks", break_after=2))
    model.enqueue(
        Reply(text="Running it.", tool_calls=[ToolCall("bash", {"command": "echo fell-back"}, id="f1")])
    )
    backup_model.enqueue(Reply(text="The command printed fell-back."))
    turn_id = api.send(ws_id, "use the fallback")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"

    switched = sock.wait_type("model_fallback")
    assert switched["from_model"] == "chained" and switched["to_model"] == "claude"
    assert switched["step"] == 0 and switched["attempt"] == 2 and switched["reason"]
    discarded = [e for e in sock.of_type("stream_end") if e.get("discard")]
    assert discarded and discarded[0]["id"] > switched["id"]  # the broken half is dropped
    assert sock.wait_type("tool_result", call_id="f1")["output"] == "fell-back"

    # the fallback got the conversation in its own wire format, tools and all
    (asked,) = [r for r in model.history if r.path.endswith("/messages")]
    assert "bash" in [t["name"] for t in asked.body["tools"]]
    assert asked.body["messages"][-1]["role"] == "user"
    assert "use the fallback" in str(asked.body["messages"][-1]["content"])
    # and the next step starts at the head of the chain again, with the fallback's call in it
    last = backup_model.history[-1].body["messages"]
    assert last[-2]["tool_calls"][0]["id"] == "f1" and last[-1] == {
        "role": "tool",
        "tool_call_id": "f1",
        "content": "fell-back",
    }

    answers = [m for m in api.history(ws_id) if m["role"] == "assistant"]
    assert [(m["model"], m["content"]) for m in answers] == [
        ("claude", "Running it."),
        ("chained", "The command printed fell-back."),
    ]
    # each answer's tokens are counted against the model that gave it
    usage = api.http.get("/v1/api/usage", params={"workstream": ws_id, "group_by": "model"}).json()
    assert {row["model"]: row["steps"] for row in usage["rows"]} == {"claude": 1, "chained": 1}


def test_a_chain_whose_every_model_fails_ends_with_an_error_naming_each(api, backup_model, open_socket):
    ws_id = api.create_workstream(model="doomed")
    sock = open_socket(ws_id)
    backup_model.enqueue(Reply(status=503, error_message="backend overloaded"))
    turn_id = api.send(ws_id, "anyone there?")
    assert sock.wait_turn_end(turn_id)["state"] == "error"
    error = sock.wait_type("error")["message"]
    assert "every model of the fallback chain failed" in error, error
    assert "doomed: HTTP 503: backend overloaded" in error and "nowhere: connection failed" in error
    assert sock.wait_type("model_fallback")["to_model"] == "nowhere"
    assert api.workstream(ws_id)["state"] == "error"
