"""Tool-call ids a model server repeats within a turn (local models number their calls `0`,
`call_0` in every step): each call is still answered once, by its own tool message, so the
workstream's history stays one a provider accepts, through the fast path, a call that fails,
approval and cancel."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def bash(command: str, call_id: str) -> ToolCall:
    return ToolCall("bash", {"command": command}, id=call_id)


def assert_every_call_answered(messages: list[dict[str, Any]]) -> None:
    """Every assistant message's calls are answered by the tool messages right after it, one
    each, in order, and no id is used twice in the request: what providers require."""
    seen: list[str] = []
    for n, message in enumerate(messages):
        asked = [c["id"] for c in message.get("tool_calls") or []]
        if message["role"] != "assistant" or not asked:
            continue
        answers = []
        for after in messages[n + 1 :]:
            if after["role"] != "tool":
                break
            answers.append(after["tool_call_id"])
        assert answers == asked, (asked, answers, messages)
        seen += asked
    assert len(seen) == len(set(seen)), seen


def test_repeated_ids_on_the_fast_path_and_a_failed_call_are_each_answered(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    for n, call_id in enumerate(["call_0", "call_0", "0", "0"]):
        model.enqueue(Reply(tool_calls=[bash(f"echo step{n}", call_id)]))
    model.enqueue(Reply(tool_calls=[ToolCall("no_such_tool", {}, id="call_0")]))  # fails at prepare
    model.enqueue(Reply(text="four steps ran"))
    turn_id = api.send(ws_id, "run four steps")
    sock.wait_turn_end(turn_id)
    outputs = [e["output"] for e in sock.of_type("tool_result")]
    assert outputs[:4] == ["step0", "step1", "step2", "step3"] and len(outputs) == 5
    assert_every_call_answered(model.history[-1].body["messages"])
    model.enqueue(Reply(text="still fine"))
    sock.wait_turn_end(api.send(ws_id, "and now?"))
    assert_every_call_answered(model.history[-1].body["messages"])
    assert api.history(ws_id)[-1]["content"] == "still fine"


def test_repeated_ids_through_approval_and_cancel_are_each_answered(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo first", "0")]))
    model.enqueue(Reply(tool_calls=[bash("echo second", "0")]))
    model.enqueue(Reply(tool_calls=[bash("touch never", "0")]))
    turn_id = api.send(ws_id, "three steps, each asked")
    for step in range(2):
        sock.wait_type("approve_request", step=step)
        assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_type("approve_request", step=2)
    assert api.cancel(ws_id).status_code == 202
    sock.wait_turn_end(turn_id, timeout=10)
    assert not (workdir / "never").exists()
    model.enqueue(Reply(text="after the cancel"))
    sock.wait_turn_end(api.send(ws_id, "what happened?"))
    messages = model.history[-1].body["messages"]
    assert_every_call_answered(messages)
    answers = [m["content"] for m in messages if m["role"] == "tool"]
    assert answers == ["first", "second", "Denied by user: Cancelled by user"]
