"""A turn end to end: HTTP in, model stream out over the websocket, bash approved and streamed."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.process_table import carrying, wait_until

pytestmark = pytest.mark.integration


def bash(command: str, **extra: object) -> ToolCall:
    return ToolCall("bash", {"command": command, **extra})


def test_plain_turn_streams_content_then_idle(api, model, open_socket, workdir):
    ws_id = api.create_workstream(name="plain", working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(chunks=["Hel", "lo ", "there"], chunk_delay=0.05))
    turn_id = api.send(ws_id, "hi")
    sock.wait_turn_end(turn_id)
    text = "".join(e["text"] for e in sock.of_type("content"))
    assert text == "Hello there"
    assert [e["state"] for e in sock.of_type("state_change")] == ["thinking", "idle"]
    assert sock.of_type("stream_end")
    ids = [e["id"] for e in sock.events]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # increasing, no gap
    assert all({"id", "ws_id", "turn_id", "type", "ts"} <= e.keys() for e in sock.events)
    history = api.history(ws_id)
    assert [(m["role"], m["content"]) for m in history] == [("user", "hi"), ("assistant", "Hello there")]


def test_bash_call_is_approved_and_its_output_streams_line_by_line(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("for i in 1 2 3; do echo line$i; sleep 0.4; done")]))
    model.enqueue(Reply(text="all three lines printed"))
    turn_id = api.send(ws_id, "count to three")
    request = sock.wait_type("approve_request")
    [item] = request["items"]
    assert item["func_name"] == "bash" and item["needs_approval"] is True
    assert "for i in 1 2 3" in item["preview"]
    assert api.workstream(ws_id)["state"] == "attention"
    assert api.approve(ws_id, approved=True).status_code == 200
    first = sock.wait_type("tool_output_chunk", call_id=item["call_id"])
    first_seen = time.monotonic()
    assert first["text"].startswith("line1")
    result = sock.wait_type("tool_result", call_id=item["call_id"])
    assert time.monotonic() - first_seen > 0.5  # line 1 arrived while the command still ran
    assert result["output"] == "line1\nline2\nline3" and result["is_error"] is False
    chunks = [e for e in sock.of_type("tool_output_chunk") if e["call_id"] == item["call_id"]]
    assert "".join(c["text"] for c in chunks) == "line1\nline2\nline3\n"
    assert sock.events.index(chunks[-1]) < sock.events.index(result)
    sock.wait_turn_end(turn_id)
    tool_message = model.history[-1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "line3" in tool_message["content"]
    assert api.history(ws_id)[-1]["content"] == "all three lines printed"


def test_denied_call_tells_the_model_the_feedback_and_never_runs(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("touch denied-marker")]))
    model.enqueue(Reply(text="understood"))
    turn_id = api.send(ws_id, "make a file")
    sock.wait_type("approve_request")
    r = api.approve(ws_id, approved=False, feedback="use the tmp folder instead")
    assert r.status_code == 200
    result = sock.wait_type("tool_result")
    assert result["output"] == "Denied by user: use the tmp folder instead" and result["is_error"]
    resolved = sock.wait_type("approval_resolved")
    assert resolved["approved"] is False and resolved["feedback"] == "use the tmp folder instead"
    sock.wait_turn_end(turn_id)
    assert not (workdir / "denied-marker").exists()
    sent = model.history[-1].body["messages"]
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": result["call_id"],
        "content": "Denied by user: use the tmp folder instead",
    }


def test_approved_with_feedback_reaches_the_model_after_the_results(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo ran")]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "run it")
    sock.wait_type("approve_request")
    api.approve(ws_id, approved=True, feedback="and then summarise")
    sock.wait_turn_end(turn_id)
    sent = model.history[-1].body["messages"]
    assert sent[-2]["role"] == "tool" and sent[-2]["content"] == "ran"
    assert sent[-1] == {"role": "user", "content": "and then summarise"}


def test_always_approves_the_tool_from_then_on(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo first")]))
    model.enqueue(Reply(text="one"))
    first = api.send(ws_id, "first")
    sock.wait_type("approve_request")
    assert api.approve(ws_id, approved=True, always=True).status_code == 200
    sock.wait_turn_end(first)
    assert api.workstream(ws_id)["auto_approve_tools"] == ["bash"]
    model.enqueue(Reply(tool_calls=[bash("echo second")]))
    model.enqueue(Reply(text="two"))
    second = api.send(ws_id, "second")
    sock.wait_turn_end(second)
    info = [e for e in sock.of_type("tool_info") if e["turn_id"] == second]
    assert info and info[0]["items"][0]["needs_approval"] is False
    assert not [e for e in sock.of_type("approve_request") if e["turn_id"] == second]
    assert [e["output"] for e in sock.of_type("tool_result")][-1] == "second"


def test_per_call_decisions_in_a_batch_of_three(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("touch a"), bash("touch b"), bash("touch c")]))
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws_id, "three files")
    items = sock.wait_type("approve_request")["items"]
    a, b, c = (i["call_id"] for i in items)
    assert api.approve(ws_id, approved=True, call_id=a).json()["pending"] == [b, c]
    assert api.approve(ws_id, approved=True, call_id=a).status_code == 200  # same again: no-op
    assert api.approve(ws_id, approved=False, call_id=b, feedback="not b").status_code == 200
    conflict = api.approve(ws_id, approved=True, call_id=b)
    assert conflict.status_code == 409 and conflict.json()["pending"] == [c]
    assert api.workstream(ws_id)["state"] == "attention"  # c still waits: nothing ran yet
    assert not (workdir / "a").exists()
    assert api.approve(ws_id, approved=True, call_id=c).json()["resumed"] is True
    sock.wait_turn_end(turn_id)
    assert (workdir / "a").exists() and (workdir / "c").exists() and not (workdir / "b").exists()
    results = {m["tool_call_id"]: m for m in api.history(ws_id) if m["role"] == "tool"}
    assert results[b]["content"] == "Denied by user: not b" and results[b]["is_error"]
    assert results[a]["content"] == "(no output)" and not results[a]["is_error"]


def test_cancel_during_a_long_bash_kills_it_and_frees_the_workstream(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    marker = f"tj-cancelled-{uuid.uuid4().hex}"  # its pids are the jail's own: found by argv
    model.enqueue(Reply(tool_calls=[bash(f"echo started; (exec -a {marker} sleep 60); touch finished")]))
    turn_id = api.send(ws_id, "long job")
    sock.wait_type("tool_output_chunk")
    cancelled_at = time.monotonic()
    assert api.cancel(ws_id).status_code == 202
    sock.wait_type("cancelled", turn_id=turn_id, timeout=10)
    sock.wait_turn_end(turn_id, timeout=10)
    assert time.monotonic() - cancelled_at < 5
    result = sock.wait_type("tool_result")
    assert result["is_error"] and "started" in result["output"] and "cancel" in result["output"].lower()
    assert wait_until(lambda: not carrying(marker), 2), carrying(marker)
    assert not (workdir / "finished").exists()
    model.enqueue(Reply(text="fresh start"))
    next_turn = api.send(ws_id, "next")
    sock.wait_turn_end(next_turn)
    assert api.history(ws_id)[-1]["content"] == "fresh start"


def test_cancel_during_the_model_stream_stops_it(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(chunks=[f"word{i} " for i in range(100)], chunk_delay=0.1))
    turn_id = api.send(ws_id, "talk for a long time")
    sock.wait_type("content")
    cancelled_at = time.monotonic()
    assert api.cancel(ws_id).status_code == 202
    sock.wait_type("cancelled", turn_id=turn_id, timeout=10)
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert time.monotonic() - cancelled_at < 3  # not the 10 s the whole answer would take
    streamed = "".join(e["text"] for e in sock.of_type("content"))
    assert streamed and "word99" not in streamed
    order = [e["type"] if e["type"] != "state_change" else e["state"] for e in sock.events]
    assert order.index("cancelled") < order.index("idle")  # ended once, as cancelled (not done first)
    assert api.history(ws_id)[-1] == {**api.history(ws_id)[-1], "role": "assistant", "content": streamed}
    model.enqueue(Reply(text="listening"))
    assert sock.wait_turn_end(api.send(ws_id, "stop"))["state"] == "idle"


def test_cancel_naming_a_turn_that_ended_leaves_the_running_one_alone(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="quick"), match="first")
    model.enqueue(Reply(chunks=["slow "] * 20, chunk_delay=0.1), match="second")
    first = api.send(ws_id, "first")
    sock.wait_turn_end(first)
    second = api.send(ws_id, "second")
    sock.wait_type("content", turn_id=second)
    late = api.http.post(f"/v1/api/workstreams/{ws_id}/cancel", json={"turn_id": first})
    assert late.status_code == 409 and late.json()["active_turn_id"] == second
    assert sock.wait_turn_end(second)["state"] == "idle" and not sock.of_type("cancelled")
    assert api.history(ws_id)[-1]["content"] == "slow " * 20
    bad = api.http.post(f"/v1/api/workstreams/{ws_id}/cancel", json={"turn_id": 7})
    assert bad.status_code == 400 and bad.json()["field"] == "turn_id"


def test_cancel_while_parked_denies_the_pending_calls(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("touch never")]))
    turn_id = api.send(ws_id, "wait for me")
    sock.wait_type("approve_request")
    assert api.cancel(ws_id).status_code == 202
    sock.wait_turn_end(turn_id, timeout=10)
    assert sock.wait_type("tool_result")["output"] == "Denied by user: Cancelled by user"
    assert api.workstream(ws_id)["pending_approvals"] == []
    assert not (workdir / "never").exists()


def test_messages_sent_during_a_turn_queue_behind_it(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(chunks=["first ", "answer"], chunk_delay=0.3), match="one")
    model.enqueue(Reply(text="second answer"), match="two")
    first = api.send(ws_id, "one")
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": "two"})
    assert r.status_code == 202 and r.json()["status"] == "queued"
    second = r.json()["turn_id"]
    sock.wait_turn_end(second)
    history = [(m["role"], m["content"]) for m in api.history(ws_id)]
    assert history == [
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
        ("assistant", "second answer"),
    ]
    ends = [e["turn_id"] for e in sock.of_type("state_change") if e["state"] == "idle"]
    assert ends == [first, second]


def test_a_queued_message_is_withdrawn_by_its_turn_id_and_never_runs(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    other = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(chunks=["first "] * 10, chunk_delay=0.1), match="one")
    model.enqueue(Reply(text="third answer"), match="three")
    first = api.send(ws_id, "one")
    key = {"Idempotency-Key": "two-" + ws_id}
    second = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": "two"}, headers=key).json()[
        "turn_id"
    ]
    third = api.send(ws_id, "three")
    assert api.workstream(ws_id)["queued_messages"] == 2
    # Named from another workstream, it is not that one's to cancel: refused, still queued.
    elsewhere = api.http.post(f"/v1/api/workstreams/{other}/cancel", json={"turn_id": second})
    assert elsewhere.status_code == 409 and api.workstream(ws_id)["queued_messages"] == 2
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/cancel", json={"turn_id": second})
    assert r.status_code == 200, r.text
    assert r.json() == {"turn_id": second, "cancel_requested": True, "status": "cancelled"}
    withdrawn = sock.wait_type("cancelled", turn_id=second)
    assert withdrawn["queued"] is True
    assert api.workstream(ws_id)["queued_messages"] == 1
    again = api.http.post(f"/v1/api/workstreams/{ws_id}/cancel", json={"turn_id": second})
    assert again.status_code == 409 and again.json()["active_turn_id"] == first
    sock.wait_turn_end(third)
    # The running turn was left alone, the withdrawn one never reached the model nor the history.
    ends = [(e["turn_id"], e["state"]) for e in sock.of_type("state_change") if e["state"] == "idle"]
    assert ends == [(first, "idle"), (third, "idle")]
    assert [e["turn_id"] for e in sock.of_type("cancelled")] == [second]
    assert [(m["role"], m["content"]) for m in api.history(ws_id)] == [
        ("user", "one"),
        ("assistant", "first " * 10),
        ("user", "three"),
        ("assistant", "third answer"),
    ]
    assert all("two" not in str(request.body["messages"]) for request in model.history)
    # The withdrawn send retried with its key (a lost response) answers it as cancelled, runs nothing.
    retried = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": "two"}, headers=key)
    assert retried.json() == {"turn_id": second, "status": "cancelled"}
    assert api.workstream(ws_id)["queued_messages"] == 0 and api.workstream(ws_id)["state"] == "idle"


def test_a_message_while_parked_queues_and_never_denies(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo approved-later")]), match="first")
    model.enqueue(Reply(text="first done"), match="approved-later")
    first = api.send(ws_id, "first")
    sock.wait_type("approve_request")
    second = api.send(ws_id, "second")
    assert api.workstream(ws_id)["queued_messages"] == 1
    assert api.workstream(ws_id)["pending_approvals"][0]["func_name"] == "bash"
    api.approve(ws_id, approved=True)
    sock.wait_turn_end(second)
    assert [e["turn_id"] for e in sock.of_type("state_change") if e["state"] == "idle"] == [first, second]
    assert sock.wait_type("tool_result")["output"] == "approved-later"


def test_websocket_commands_send_approve_and_cancel(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id, token_in="header")
    model.enqueue(Reply(tool_calls=[bash("echo via-socket")]))
    model.enqueue(Reply(text="done"))
    sock.send({"type": "send", "message": "go", "request_id": 1})
    reply = sock.wait_reply()
    assert reply["status"] == 202 and reply["request_id"] == 1
    sock.wait_type("approve_request")
    sock.send({"type": "approve", "approved": True})
    assert sock.wait_reply()["status"] == 200
    sock.wait_turn_end(reply["body"]["turn_id"])
    assert sock.wait_type("tool_result")["output"] == "via-socket"
    sock.send({"type": "approve", "approved": "yes"})
    bad = sock.wait_reply()
    assert bad["status"] == 400 and bad["body"]["field"] == "approved"
    sock.send({"type": "cancel"})
    assert sock.wait_reply()["status"] == 409


def test_reconnect_with_after_mid_turn_has_no_gap_and_no_duplicate(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    model.enqueue(Reply(chunks=[f"w{i} " for i in range(30)], chunk_delay=0.06))
    first = open_socket(ws_id)
    turn_id = api.send(ws_id, "stream a lot")
    first.wait_for(lambda e: e["type"] == "content" and "w5" in e["text"])
    first.close()
    seen = list(first.events)
    cursor = seen[-1]["id"]
    second = open_socket(ws_id, after=cursor)
    second.wait_turn_end(turn_id)
    ids = [e["id"] for e in seen + second.events]
    assert ids == list(range(ids[0], ids[-1] + 1))
    text = "".join(e["text"] for e in seen + second.events if e["type"] == "content")
    assert text == "".join(f"w{i} " for i in range(30))


def test_model_unreachable_ends_the_turn_with_an_error_event(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(status=503, error_message="overloaded"))
    model.enqueue(Reply(status=503, error_message="overloaded"))
    turn_id = api.send(ws_id, "are you there")
    error = sock.wait_type("error", turn_id=turn_id)
    assert "503" in error["message"] or "unavailable" in error["message"].lower()
    end = sock.wait_turn_end(turn_id)
    assert end["state"] == "error"
    model.enqueue(Reply(text="back again"))
    again = api.send(ws_id, "retry")
    assert sock.wait_turn_end(again)["state"] == "idle"


def test_blocked_command_is_refused_without_a_prompt(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("rm -rf /")]))
    model.enqueue(Reply(text="I will not"))
    turn_id = api.send(ws_id, "wipe")
    sock.wait_turn_end(turn_id)
    assert not sock.of_type("approve_request")
    result = sock.wait_type("tool_result")
    assert result["is_error"] and result["output"].startswith("Blocked: command matches dangerous pattern")


def test_secrets_never_reach_tool_output(api, model, open_socket, workdir):
    from tests.integration.services import API_TOKEN, MODEL_KEY

    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("env; echo DB=$DATABASE_URL")]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "show env")
    sock.wait_turn_end(turn_id)
    output = sock.wait_type("tool_result")["output"]
    assert "PATH=" in output
    for secret in (MODEL_KEY, API_TOKEN, "OPENAI_API_KEY", "REDIS_URL="):
        assert secret not in output


def test_reasoning_streams_and_is_kept_in_the_history_but_not_sent_back(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(reasoning="weighing it up", text="forty-two"))
    model.enqueue(Reply(text="still forty-two"))
    sock.wait_turn_end(api.send(ws_id, "the answer?"))
    assert "".join(e["text"] for e in sock.of_type("reasoning")) == "weighing it up"
    answer = api.history(ws_id)[-1]
    assert (answer["content"], answer["reasoning"]) == ("forty-two", "weighing it up")
    sock.wait_turn_end(api.send(ws_id, "sure?"))
    sent = model.history[-1].body["messages"]
    assert "weighing it up" not in str(sent)
    assert "reasoning" not in api.history(ws_id)[-1]  # a reply without reasoning has none
