"""Editing a pending call before it runs: approved with `arguments`, the call runs with the
person's arguments, the model is told what changed, and the record keeps both the model's
arguments and the edit, with who made it. A wrong edit is refused and decides nothing."""

from __future__ import annotations

import json

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import EventSocket

pytestmark = pytest.mark.integration


def _pending(api, model, open_socket, workdir, calls: list[ToolCall]) -> tuple[str, str, EventSocket, dict]:  # type: ignore[no-untyped-def]
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="noted"))
    turn_id = api.send(ws_id, "do it")
    request = sock.wait_type("approve_request")
    return ws_id, turn_id, sock, request


def test_an_edited_bash_call_runs_as_edited_and_the_model_is_told(api, model, open_socket, workdir):
    ws_id, turn_id, sock, request = _pending(
        api, model, open_socket, workdir, [ToolCall("bash", {"command": "rm -rf build"}, id="c1")]
    )
    assert [i["call_id"] for i in request["items"]] == ["c1"]
    r = api.approve(ws_id, approved=True, call_id="c1", arguments={"command": "echo edited > kept.txt"})
    assert r.status_code == 200, r.text
    assert r.json()["decided"] == ["c1"]
    resolved = sock.wait_type("approval_resolved")
    assert resolved["arguments"] == {"command": "echo edited > kept.txt"} and resolved["call_ids"] == ["c1"]
    sock.wait_turn_end(turn_id)
    assert (workdir / "kept.txt").read_text() == "edited\n"

    # The model reads its own call, the result of the edited one, and a note of the change.
    sent = model.history[-1].body["messages"]
    [call] = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert '"rm -rf build"' in call["function"]["arguments"]  # what it asked for stays its own
    assert sent[-2] == {"role": "tool", "tool_call_id": "c1", "content": "(no output)"}
    note = sent[-1]
    assert note["role"] == "user" and "changed the arguments of your bash call c1" in note["content"]
    assert "echo edited > kept.txt" in note["content"]

    # The history shows what ran and who decided; the model's call keeps its arguments.
    history = api.history(ws_id)
    [result] = [m for m in history if m["role"] == "tool"]
    decision = result["decision"]
    assert decision["approved"] is True and decision["arguments"] == {"command": "echo edited > kept.txt"}
    assert decision["by"] and decision["via"] == "http"


def test_an_edit_is_prepared_again_by_the_tool(api, model, open_socket, workdir):
    """The worker prepares the edited call as the model's: a write outside the folder the model
    could not make is not made by an edit either."""
    ws_id, turn_id, sock, _ = _pending(
        api, model, open_socket, workdir, [ToolCall("write_file", {"path": "a.txt", "content": "x"}, id="w1")]
    )
    outside = workdir.parent / f"{workdir.name}-outside.txt"
    r = api.approve(ws_id, approved=True, call_id="w1", arguments={"path": str(outside), "content": "y"})
    assert r.status_code == 200, r.text
    result = sock.wait_type("tool_result")
    sock.wait_turn_end(turn_id)
    assert result["is_error"] and not outside.exists()


@pytest.mark.parametrize(
    ("arguments", "extra", "status", "says"),
    [
        ({"command": 42}, {}, 422, "arguments: command: 42 is not of type 'string'"),
        ({"cmd": "ls"}, {}, 422, "bash does not take 'cmd'"),
        ({}, {}, 422, "'command' is a required property"),
        ({"command": "ls"}, {"approved": False}, 400, "a denied call does not run"),
        ({"command": "ls"}, {"call_id": None}, 400, "name the call"),
        ({"command": "ls"}, {"always": True}, 400, "approved once, not always"),
        ({"command": "x" * 300_000}, {}, 413, "the limit is"),
        ("ls", {}, 400, "arguments"),
        ([{"command": "ls"}], {}, 400, "arguments"),
        ({"command": "ls\ud800"}, {}, 400, None),
    ],
    ids=[
        "wrong-type",
        "unknown-name",
        "missing",
        "denied",
        "no-call-id",
        "always",
        "huge",
        "string",
        "list",
        "surrogate",
    ],
)
def test_a_wrong_edit_is_refused_and_decides_nothing(
    api, model, open_socket, workdir, arguments, extra, status, says
):
    ws_id, turn_id, sock, _ = _pending(
        api, model, open_socket, workdir, [ToolCall("bash", {"command": "echo model"}, id="c1")]
    )
    body = {"approved": True, "call_id": "c1", "arguments": arguments, **extra}
    if body["call_id"] is None:
        del body["call_id"]
    raw = json.dumps(body).encode()  # ASCII escapes: a lone surrogate goes as \ud800
    url = f"/v1/api/workstreams/{ws_id}/approve"
    r = api.http.post(url, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    if says:
        assert says in r.json()["error"], r.json()
    # Nothing was decided: the call still waits, and runs as the model asked once approved.
    assert [p["call_id"] for p in api.workstream(ws_id)["pending_approvals"]] == ["c1"]
    assert api.approve(ws_id, approved=True, call_id="c1").status_code == 200
    result = sock.wait_type("tool_result")
    sock.wait_turn_end(turn_id)
    assert result["output"] == "model"


def test_editing_one_call_of_a_batch_leaves_the_others_as_the_model_asked(api, model, open_socket, workdir):
    calls = [
        ToolCall("bash", {"command": "echo one"}, id="a"),
        ToolCall("bash", {"command": "echo two"}, id="b"),
    ]
    ws_id, turn_id, sock, _ = _pending(api, model, open_socket, workdir, calls)
    assert (
        api.approve(ws_id, approved=True, call_id="b", arguments={"command": "echo TWO"}).status_code == 200
    )
    # A repeat of the same decision (a retried request) changes nothing.
    again = api.approve(ws_id, approved=True, call_id="b", arguments={"command": "echo TWO"})
    assert again.status_code == 200 and again.json()["decided"] == []
    assert api.approve(ws_id, approved=True, call_id="a").status_code == 200
    sock.wait_turn_end(turn_id)
    outputs = {e["call_id"]: e["output"] for e in sock.of_type("tool_result")}
    assert outputs == {"a": "one", "b": "TWO"}
    sent = model.history[-1].body["messages"]
    assert sum("changed the arguments" in str(m.get("content")) for m in sent) == 1


def test_the_websocket_approves_as_edited_and_answers_a_wrong_edit_as_http_does(
    api, model, open_socket, workdir
):
    ws_id, turn_id, sock, _ = _pending(
        api, model, open_socket, workdir, [ToolCall("bash", {"command": "echo model"}, id="s1")]
    )
    sock.send(
        {"type": "approve", "approved": True, "call_id": "s1", "arguments": {"command": 7}, "request_id": 1}
    )
    reply = sock.wait_reply()
    assert reply["status"] == 422 and reply["body"]["field"] == "arguments", reply
    sock.send({"type": "approve", "approved": True, "call_id": "s1", "arguments": {"command": "echo socket"}})
    result = sock.wait_type("tool_result")
    sock.wait_turn_end(turn_id)
    assert result["output"] == "socket"
    resolved = sock.wait_type("approval_resolved")
    assert resolved["via"] == "websocket" and resolved["arguments"]["command"] == "echo socket"
