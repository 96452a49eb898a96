"""task_agent through the running service: sub-agents as child workstreams whose turns run on
the worker like any other, followed and approved from the parent, and their end as the parent
call's result, whatever dies on the way."""

from __future__ import annotations

import time
import uuid

import pytest

from app.storage.database import Database
from app.storage.models import CallStatus, Turn, TurnStatus, Workstream
from app.storage.models import ToolCall as CallRow
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.test_durability import _consistent
from tests.integration.test_tool_foundation import SIGNAL, _wait_phase, offered_tools, tool_results
from tests.process_table import carrying, wait_until

pytestmark = pytest.mark.integration


def task(prompt: str, call_id: str) -> ToolCall:
    return ToolCall("task_agent", {"prompt": prompt}, id=call_id)


def bash(command: str, call_id: str | None = None) -> ToolCall:
    return ToolCall("bash", {"command": command}, id=call_id)


def child_events(sock, call_id: str, type_: str | None = None) -> list[dict]:
    """The child's events as the parent's stream carried them (the inner events)."""
    return [
        e["event"]
        for e in sock.of_type("subagent")
        if e["call_id"] == call_id and (type_ is None or e["event"]["type"] == type_)
    ]


def wait_child_event(sock, parent_call: str, type_: str, timeout: float = 30, **fields) -> dict:
    wrapped = sock.wait_for(
        lambda e: (
            e.get("type") == "subagent"
            and e["call_id"] == parent_call
            and e["event"]["type"] == type_
            and all(e["event"].get(k) == v for k, v in fields.items())
        ),
        timeout,
    )
    return wrapped


def requests_with(model, marker: str) -> list:
    """The model requests whose first user message is the child's prompt carrying `marker`."""
    out = []
    for r in model.history:
        messages = (r.body or {}).get("messages") or []
        users = [m for m in messages if m.get("role") == "user"]
        if users and isinstance(users[0].get("content"), str) and marker in users[0]["content"]:
            out.append(r)
    return out


# -- one child ---------------------------------------------------------------------------------


def test_one_sub_agent_answers_its_parent_and_is_followed_from_the_parent_stream(
    api, model, open_socket, workdir, task_queue
):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="Delegating.", tool_calls=[task("CHILD-ONE: how many apples?", "t1")]))
    model.enqueue(Reply(text="There are seven apples."), match="CHILD-ONE")
    model.enqueue(Reply(text="The helper counted seven."))
    turn_id = api.send(ws_id, "count apples with a helper")
    request = sock.wait_type("approve_request")
    assert request["items"][0]["func_name"] == "task_agent"
    assert request["items"][0]["header"] == "task_agent CHILD-ONE: how many apples?"
    assert api.approve(ws_id, approved=True, call_id="t1").status_code == 200
    result = sock.wait_type("tool_result", call_id="t1")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert result == {**result, "output": "There are seven apples.", "is_error": False}
    assert tool_results(model, 2) == {"t1": "There are seven apples."}

    # the child's events, echoed into the parent's stream under the parent's call
    started = wait_child_event(sock, "t1", "message")
    child_id = started["child_ws_id"]
    assert started["event"]["content"] == "CHILD-ONE: how many apples?"
    said = "".join(e["text"] for e in child_events(sock, "t1", "content"))
    assert said == "There are seven apples."
    assert [e["state"] for e in child_events(sock, "t1", "state_change")] == ["thinking", "idle"]

    # the child's request: the task kind's tools (never task_agent), its own prompt
    (child_request,) = requests_with(model, "CHILD-ONE")
    child_tools = [t["function"]["name"] for t in child_request.body["tools"]]
    assert "bash" in child_tools and "read_file" in child_tools and "task_agent" not in child_tools
    assert "task_agent" in offered_tools(model, 0)
    assert "sub-agent" in child_request.body["messages"][0]["content"]

    # the parent's history names the child on the call and on its result
    history = api.history(ws_id)
    _consistent(history)
    assert history[1]["tool_calls"][0]["child_ws_id"] == child_id
    assert history[2] == {**history[2], "tool_call_id": "t1", "child_ws_id": child_id}
    # the child is a workstream of its own, with its own stream and history
    child = api.workstream(child_id)
    assert child["kind"] == "task" and child["state"] == "idle"
    assert [(m["role"], m["content"]) for m in api.history(child_id)] == [
        ("user", "CHILD-ONE: how many apples?"),
        ("assistant", "There are seven apples."),
    ]
    refused = api.http.post(f"/v1/api/workstreams/{child_id}/send", json={"message": "more"})
    assert refused.status_code == 409 and "sub-agent" in refused.json()["error"]
    # a redelivered finish (the fan-in's message sent again) changes nothing
    before = api.history(ws_id)
    task_queue.finish_call(turn_id, "t1", "a late repeat")
    model.enqueue(Reply(text="next"))
    api.send(ws_id, "and then?")  # a later turn runs after the repeat was handled
    api.wait_idle(ws_id)
    assert api.history(ws_id)[: len(before)] == before
    assert "a late repeat" not in str(api.history(ws_id))


def test_three_sub_agents_of_one_batch_run_at_the_same_time(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    names = ["ALPHA", "BRAVO", "CHARLIE"]
    model.enqueue(Reply(tool_calls=[task(f"CHILD-{n}: report", f"t{i}") for i, n in enumerate(names)]))
    for n in names:  # each answer streams for about 1.5 s
        model.enqueue(
            Reply(chunks=[f"{n.lower()}{i} " for i in range(10)], chunk_delay=0.15), match=f"CHILD-{n}"
        )
    model.enqueue(Reply(text="all three reported"))
    turn_id = api.send(ws_id, "fan out")
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    starts = [requests_with(model, f"CHILD-{n}")[0].time for n in names]  # its model asked
    ends = [child_events(sock, f"t{i}", "stream_end")[0]["ts"] for i in range(len(names))]  # answered
    assert max(starts) < min(ends), (starts, ends)  # each began before any had finished
    results = tool_results(model, 4)
    for i, n in enumerate(names):
        assert results[f"t{i}"] == "".join(f"{n.lower()}{k} " for k in range(10))
    children = {e["child_ws_id"] for e in sock.of_type("subagent")}
    assert len(children) == 3
    _consistent(api.history(ws_id))


# -- approvals from the parent -------------------------------------------------------------------


def test_a_sub_agents_call_is_approved_from_the_parent_with_feedback(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-APPROVE: write the file", "t1")]))
    model.enqueue(Reply(tool_calls=[bash("echo written > from-child.txt", "c1")]), match="CHILD-APPROVE")
    model.enqueue(Reply(text="The file is written."), match="use the short name")
    model.enqueue(Reply(text="done via helper"))
    turn_id = api.send(ws_id, "delegate a write")
    sock.wait_type("approve_request")
    api.approve(ws_id, approved=True)
    asked = wait_child_event(sock, "t1", "approve_request")
    child_id = asked["child_ws_id"]
    assert asked["event"]["items"][0]["header"] == "$ echo written > from-child.txt"
    # the parent's workstream lists the child's pending call, tagged
    (pending,) = api.workstream(ws_id)["pending_approvals"]
    assert pending == {**pending, "call_id": "c1", "child_ws_id": child_id, "parent_call_id": "t1"}
    # ... and so needs attention itself, in its own view and in the list (where children are not)
    assert api.workstream(ws_id)["state"] == "attention"
    listed = {w["ws_id"]: w["state"] for w in api.http.get("/v1/api/workstreams").json()["workstreams"]}
    assert listed[ws_id] == "attention" and listed[child_id] == "attention"
    assert not (workdir / "from-child.txt").exists()
    decided = api.approve(ws_id, approved=True, call_id="c1", feedback="use the short name")
    assert decided.status_code == 200 and decided.json()["decided"] == ["c1"]
    resolved = wait_child_event(sock, "t1", "approval_resolved")
    assert resolved["event"]["call_ids"] == ["c1"] and resolved["event"]["feedback"] == "use the short name"
    assert api.workstream(ws_id)["state"] != "attention"  # decided: nothing waits for a person
    assert wait_child_event(sock, "t1", "tool_result", call_id="c1")["event"]["is_error"] is False
    assert sock.wait_type("tool_result", call_id="t1")["output"] == "The file is written."
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert (workdir / "from-child.txt").read_text() == "written\n"
    assert api.approve(ws_id, approved=False, call_id="c1").status_code == 409  # ended: nothing pending
    assert api.workstream(ws_id)["pending_approvals"] == []


def test_always_on_a_sub_agents_call_is_the_parents_always(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-ALWAYS: two commands", "t1")]))
    model.enqueue(Reply(tool_calls=[bash("echo one", "c1")]), match="CHILD-ALWAYS")
    model.enqueue(Reply(tool_calls=[bash("echo two", "c2")]), match="CHILD-ALWAYS")
    model.enqueue(Reply(text="ran both"), match="CHILD-ALWAYS")
    model.enqueue(Reply(text="fine"))
    turn_id = api.send(ws_id, "two commands via a helper")
    sock.wait_type("approve_request")
    api.approve(ws_id, approved=True)
    wait_child_event(sock, "t1", "approve_request")
    assert api.approve(ws_id, approved=True, always=True).json()["decided"] == ["c1"]  # every pending one
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    assert len(child_events(sock, "t1", "approve_request")) == 1  # the second ran unasked
    assert "bash" in api.workstream(ws_id)["auto_approve_tools"]
    assert sock.wait_type("tool_result", call_id="t1")["output"] == "ran both"


def test_hostile_decisions_for_sub_agents_are_4xx(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-HOSTILE: wait for me", "t1")]))
    model.enqueue(Reply(tool_calls=[bash("echo hi", "c1")]), match="CHILD-HOSTILE")
    model.enqueue(Reply(text="hi said"), match="CHILD-HOSTILE")
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "hostile")
    sock.wait_type("approve_request")
    api.approve(ws_id, approved=True)
    child_id = wait_child_event(sock, "t1", "approve_request")["child_ws_id"]
    for bad in ("a\x00b", "\ud800", 12, ["x"], {"a": 1}, "x" * 33):
        body = {"approved": True, "call_id": "c1", "child_ws_id": bad}
        r = api.http.post(f"/v1/api/workstreams/{ws_id}/approve", content=_json(body))
        assert r.status_code == 400 and "child_ws_id" in r.json()["error"], (bad, r.text)
    r = api.approve(ws_id, approved=True, call_id="c1", child_ws_id="f" * 32)
    assert r.status_code == 404 and "sub-agent" in r.json()["error"]
    r = api.approve(ws_id, approved=True, call_id="nope")
    assert r.status_code == 409
    # a workstream that is not its parent cannot decide for it
    other = api.create_workstream(working_dir=str(workdir))
    assert api.approve(other, approved=True, call_id="c1", child_ws_id=child_id).status_code == 404
    assert api.approve(ws_id, approved=True, call_id="c1", child_ws_id=child_id).json()["decided"] == ["c1"]
    assert sock.wait_turn_end(turn_id)["state"] == "idle"


def _json(body: dict) -> bytes:
    import json

    return json.dumps(body).encode()


# -- limits, failures, hostile prompts ----------------------------------------------------------


@pytest.fixture
def max_turns_one(services):
    """The worker restarted with `[tools] agent_max_turns = 1`; restored after the test."""
    config = services.tmp / "config.toml"
    original = config.read_text()
    bounded = services.tmp / "config-max-turns.toml"
    bounded.write_text(original.replace("[tools]\n", "[tools]\nagent_max_turns = 1\n", 1))
    services.kill("worker")
    services.env["TURNSTONE_CONFIG"] = str(bounded)
    services.start_worker()
    yield
    services.kill("worker")
    services.env["TURNSTONE_CONFIG"] = str(config)
    services.start_worker()


def test_at_agent_max_turns_the_sub_agent_is_asked_for_its_answer_without_tools(
    api, model, open_socket, workdir, max_turns_one
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-LIMIT: keep going", "t1")]))
    model.enqueue(Reply(tool_calls=[bash("echo step one", "c1")]), match="CHILD-LIMIT")
    # at the limit it still asks for a command: not run; its words are the answer
    model.enqueue(
        Reply(text="Stopped after one step.", tool_calls=[bash("touch should-not-exist", "c2")]),
        match="CHILD-LIMIT",
    )
    model.enqueue(Reply(text="helper stopped"))
    turn_id = api.send(ws_id, "bounded helper")
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    first, last = requests_with(model, "CHILD-LIMIT")
    assert first.body.get("tools") and not last.body.get("tools")
    assert "final answer" in last.body["messages"][-1]["content"]
    assert sock.wait_type("tool_result", call_id="t1")["output"] == "Stopped after one step."
    assert not (workdir / "should-not-exist").exists()
    child_id = child_events(sock, "t1")[0]["ws_id"]
    child_history = api.history(child_id)
    _consistent(child_history)
    assert child_history[-1] == {
        **child_history[-1],
        "role": "assistant",
        "content": "Stopped after one step.",
    }
    assert "tool_calls" not in child_history[-1]


def test_a_failing_sub_agent_gives_its_parent_an_error_result(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-FAIL: try", "t1")]))
    for _ in range(2):  # the first try and the one retry
        model.enqueue(Reply(status=500, error_message="the model is down"), match="CHILD-FAIL")
    model.enqueue(Reply(text="the helper failed"))
    turn_id = api.send(ws_id, "delegate to a broken model")
    result = sock.wait_type("tool_result", call_id="t1")
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    assert result["is_error"] is True and result["output"].startswith("Error: the sub-agent failed:")
    assert "500" in result["output"] or "down" in result["output"]
    assert api.history(ws_id)[-1]["content"] == "the helper failed"


def test_hostile_task_agent_arguments_are_error_items_or_stored_safely(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("task_agent", {"prompt": 5}, id="h1"),
                ToolCall("task_agent", {"prompt": {"deep": [[[["x"]]]]}}, id="h2"),
                ToolCall("task_agent", {"prompt": "x" * 200_000}, id="h3"),
                ToolCall("task_agent", {"prompt": "   "}, id="h4"),
                ToolCall("task_agent", {"prompt": "CHILD-ODD: nul \x00 and lone \ud800 end"}, id="h5"),
                ToolCall("task_agent", '{"prompt": "CHILD-ODD', id="h6"),
            ]
        )
    )
    model.enqueue(Reply(text="odd prompt handled"), match="CHILD-ODD: nul")
    model.enqueue(Reply(text="survived"))
    turn_id = api.send(ws_id, "hostile prompts")
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    results = {m["tool_call_id"]: m for m in api.history(ws_id) if m["role"] == "tool"}
    for bad in ("h1", "h2", "h4"):
        assert results[bad]["is_error"] and "non-empty string" in results[bad]["content"]
    assert results["h3"]["is_error"] and "at most 100,000" in results["h3"]["content"]
    assert results["h6"]["is_error"]
    assert results["h5"] == {**results["h5"], "is_error": False, "content": "odd prompt handled"}
    child = api.history(results["h5"]["child_ws_id"])
    assert child[0]["content"] == "CHILD-ODD: nul \\x00 and lone \ufffd end"
    assert api.history(ws_id)[-1]["content"] == "survived"


# -- cancel -----------------------------------------------------------------------------------------


def test_cancelling_the_parent_stops_its_sub_agents_and_their_commands(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-CANCEL: run long", "t1")]))
    marker = f"tj-child-{uuid.uuid4().hex}"  # its pids are the jail's own: found by argv
    model.enqueue(
        Reply(tool_calls=[bash(f"echo started; (exec -a {marker} sleep 30); touch finished", "c1")]),
        match="CHILD-CANCEL",
    )
    turn_id = api.send(ws_id, "start a long helper")
    wait_child_event(sock, "t1", "tool_output_chunk")
    assert wait_until(lambda: carrying(marker), 10)  # "started" is printed before it execs
    assert api.cancel(ws_id).status_code == 202
    result = sock.wait_type("tool_result", call_id="t1")
    assert result["is_error"] is True and "Cancelled" in result["output"]
    sock.wait_type("cancelled", turn_id=turn_id)
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert wait_until(lambda: not carrying(marker), 10), carrying(marker)
    child_id = child_events(sock, "t1")[0]["ws_id"]
    api.wait_idle(child_id)
    child_history = api.history(child_id)
    _consistent(child_history)
    assert child_history[-1]["role"] == "tool" and child_history[-1]["is_error"]
    assert not (workdir / "finished").exists()
    history = api.history(ws_id)
    _consistent(history)
    assert history[-1] == {**history[-1], "role": "tool", "tool_call_id": "t1", "is_error": True}


def test_a_sub_agent_gets_its_parents_network(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True, network="host")
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-NET: where are you?", "t1")]))
    model.enqueue(Reply(text="on the host's network"), match="CHILD-NET")
    model.enqueue(Reply(text="done"))
    sock.wait_turn_end(api.send(ws_id, "delegate"))
    child_id = child_events(sock, "t1")[0]["ws_id"]
    assert api.workstream(child_id)["network"] == "host"


def test_cancelling_the_parent_denies_its_sub_agents_pending_calls(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-PENDING: ask first", "t1")]))
    model.enqueue(Reply(tool_calls=[bash("touch never", "c1")]), match="CHILD-PENDING")
    turn_id = api.send(ws_id, "helper that asks")
    sock.wait_type("approve_request")
    api.approve(ws_id, approved=True)
    wait_child_event(sock, "t1", "approve_request")
    assert api.cancel(ws_id).status_code == 202
    sock.wait_type("cancelled", turn_id=turn_id)
    denied = wait_child_event(sock, "t1", "tool_result", call_id="c1")["event"]
    assert denied["is_error"] and denied["output"] == "Denied by user: Cancelled by user"
    result = sock.wait_type("tool_result", call_id="t1")
    assert result["is_error"] and "Cancelled" in result["output"]
    assert api.workstream(ws_id)["pending_approvals"] == []
    assert not (workdir / "never").exists()


# -- durability -------------------------------------------------------------------------------------


def test_worker_killed_during_a_sub_agents_model_step(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-KILLSTEP: speak slowly", "t1")]))
    model.enqueue(Reply(chunks=[f"slow{i} " for i in range(40)], chunk_delay=0.1), match="CHILD-KILLSTEP")
    model.enqueue(Reply(text="the whole answer"), match="CHILD-KILLSTEP")
    model.enqueue(Reply(text="parent done"))
    turn_id = api.send(ws_id, "slow helper")
    wait_child_event(sock, "t1", "content")
    services.kill("worker")
    services.start_worker()
    assert sock.wait_turn_end(turn_id, timeout=90)["state"] == "idle"
    assert sock.wait_type("tool_result", call_id="t1")["output"] == "the whole answer"
    assert wait_child_event(sock, "t1", "stream_end", discard=True)
    _consistent(api.history(ws_id))
    assert api.history(ws_id)[-1]["content"] == "parent done"


def test_worker_killed_during_a_sub_agents_tool_batch(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    command = "echo run >> runs; echo started; sleep 4; echo done >> runs"
    model.enqueue(Reply(tool_calls=[task("CHILD-KILLBATCH: run it", "t1")]))
    model.enqueue(Reply(tool_calls=[bash(command, "c1")]), match="CHILD-KILLBATCH")
    model.enqueue(Reply(text="it was interrupted; I checked"), match="CHILD-KILLBATCH")
    model.enqueue(Reply(text="parent done"))
    turn_id = api.send(ws_id, "helper with a command")
    wait_child_event(sock, "t1", "tool_output_chunk")
    services.kill("worker")
    services.start_worker()
    assert sock.wait_turn_end(turn_id, timeout=90)["state"] == "idle"
    interrupted = wait_child_event(sock, "t1", "tool_result", call_id="c1")["event"]
    assert interrupted["is_error"] and interrupted["output"].startswith("Interrupted")
    assert sock.wait_type("tool_result", call_id="t1")["output"] == "it was interrupted; I checked"
    assert (workdir / "runs").read_text().count("run\n") == 1  # never run twice
    _consistent(api.history(ws_id))
    _consistent(api.history(interrupted["ws_id"]))


def test_the_sweeper_delivers_an_answer_a_crash_left_undelivered(
    api, model, fake_tools, services, open_socket, workdir
):
    """What a child leaves when its process dies right after committing its end: an answer
    recorded, the parent's call still waiting."""
    fake_tools.write(SIGNAL)
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("await_signal", {}, id="s1")]))
    model.enqueue(Reply(text="got it"))
    turn_id = api.send(ws_id, "wait")
    _wait_phase(api, ws_id, "awaiting")
    db = Database(services.db.url)
    try:
        with db.session() as s:
            row = s.exec(_call(turn_id, "s1")).one()
            s.add(
                Workstream(
                    id="c" * 32,
                    name="ended child",
                    kind="task",
                    parent_id=ws_id,
                    parent_turn_id=turn_id,
                    parent_call_id="s1",
                    parent_call_row=row.id,
                    working_dir=str(workdir),
                    task_output="recorded before the crash",
                )
            )
    finally:
        db.dispose()
    assert sock.wait_turn_end(turn_id, timeout=30)["state"] == "idle"
    assert tool_results(model, 1) == {"s1": "recorded before the crash"}


def test_the_sweeper_stops_a_sub_agent_whose_parent_turn_is_gone(api, model, services, open_socket, workdir):
    """What a parent leaves when its process dies right after committing its end: a child
    still running, for a call that has ended."""
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[task("CHILD-ORPHAN: run long", "t1")]))
    marker = f"tj-orphan-{uuid.uuid4().hex}"  # its pids are the jail's own: found by argv
    model.enqueue(
        Reply(tool_calls=[bash(f"echo started; (exec -a {marker} sleep 30)", "c1")]), match="CHILD-ORPHAN"
    )
    model.enqueue(Reply(text="interrupted, fine"), match="CHILD-ORPHAN")
    turn_id = api.send(ws_id, "orphan")
    started = wait_child_event(sock, "t1", "tool_output_chunk")
    assert wait_until(lambda: carrying(marker), 10)  # "started" is printed before it execs
    db = Database(services.db.url)
    try:
        with db.session() as s:  # the parent's end, committed by a process that died before its after-work
            row = s.exec(_call(turn_id, "t1")).one()
            row.status, row.output, row.is_error = CallStatus.CANCELLED, "gone", True
            s.add(row)
            turn = s.get(Turn, turn_id)
            turn.status, turn.phase = TurnStatus.CANCELLED, "finished"
            s.add(turn)
            parent = s.get(Workstream, ws_id)
            parent.active_turn_id, parent.state = None, "idle"
            s.add(parent)
        assert wait_until(lambda: not carrying(marker), 20), carrying(marker)
    finally:
        db.dispose()
    child_id = started["child_ws_id"]
    api.wait_idle(child_id)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not api.history(child_id)[-1]["is_error"]:
        time.sleep(0.1)
    assert api.history(child_id)[-1] == {**api.history(child_id)[-1], "role": "tool", "is_error": True}


def _call(turn_id: str, call_id: str):  # type: ignore[no-untyped-def]
    from sqlmodel import select

    return select(CallRow).where(CallRow.turn_id == turn_id, CallRow.call_id == call_id)
