"""Coordinator workstreams through the running service: children spawned as ordinary workstreams
that run in parallel on the workers, waited for with no worker held (whatever dies meanwhile),
their approvals decided from the coordinator, their task list kept, and closed with it."""

from __future__ import annotations

import json

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import wait_until
from tests.integration.test_durability import _consistent
from tests.integration.test_subagents import requests_with
from tests.integration.test_tool_foundation import offered_tools

pytestmark = pytest.mark.integration

COORD = "COORD-MARK"  # in the coordinator's conversation only: its scripted replies match it


def coordinator(api, workdir, **body) -> str:
    return api.create_workstream(kind="coordinator", working_dir=str(workdir), **body)


def result_of(sock, call_id: str, timeout: float = 60) -> dict:
    event = sock.wait_type("tool_result", timeout=timeout, call_id=call_id)
    assert not event["is_error"], event["output"]
    return json.loads(event["output"])


def children_of(api, ws_id: str) -> list[dict]:
    listed = api.http.get("/v1/api/workstreams").json()["workstreams"]
    return [w for w in listed if w.get("parent_id") == ws_id]


def test_kind_is_validated_and_a_coordinator_is_offered_its_tool_set(api, model, open_socket, workdir):
    for bad in ("task", "bogus", "x" * 300, "\x00"):
        refused = api.http.post("/v1/api/workstreams", json={"kind": bad})
        assert refused.status_code == 400 and "kind" in refused.json()["error"], refused.text
    assert api.http.post("/v1/api/workstreams", json={"kind": 7}).status_code == 400
    ws_id = coordinator(api, workdir)
    assert api.workstream(ws_id)["kind"] == "coordinator"
    model.enqueue(Reply(text="ready"))
    api.send(ws_id, "hello")
    api.wait_idle(ws_id)
    offered = set(offered_tools(model, 0))
    assert offered == {
        "spawn_workstream", "spawn_batch", "wait_for_workstream", "inspect_workstream",
        "send_to_workstream", "cancel_workstream", "close_workstream", "delete_workstream",
        "list_workstreams", "list_nodes", "tasks", "close_all_children", "memory",
    }  # fmt: skip
    assert "bash" not in offered and "task_agent" not in offered


def test_three_children_run_in_parallel_on_two_workers_and_are_waited_for(
    api, model, services, open_socket, workdir
):
    # two workers of two slots each: three children streaming at once need both
    services.kill("worker")
    services.start_worker(concurrency=2)
    second = services.start_worker("worker2", concurrency=2)
    try:
        ws_id = coordinator(api, workdir)
        sock = open_socket(ws_id)
        names = ["ALPHA", "BRAVO", "CHARLIE"]
        batch = [{"prompt": f"CHILD-{n}: report", "name": n.lower()} for n in names]
        model.enqueue(
            Reply(tool_calls=[ToolCall("spawn_batch", {"workstreams": batch}, id="s1")]), match=COORD
        )
        model.enqueue(
            Reply(tool_calls=[ToolCall("wait_for_workstream", {"timeout": 120}, id="w1")]), match=COORD
        )
        model.enqueue(Reply(text="all three reported"), match=COORD)
        for n in names:  # each answer streams for about 2 s
            model.enqueue(
                Reply(chunks=[f"{n.lower()}{i} " for i in range(10)], chunk_delay=0.2),
                match=f"CHILD-{n}: report",
            )
        worker_log = services.log_size("worker")
        second_log = services.log_size("worker2")
        turn_id = api.send(ws_id, f"{COORD} fan out")
        started = result_of(sock, "s1")
        assert [c["name"] for c in started["started"]] == ["alpha", "bravo", "charlie"] and not started[
            "refused"
        ]
        waited = result_of(sock, "w1", timeout=90)
        assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"

        assert waited["done"] and not waited["timed_out"] and waited["still_working"] == []
        answers = {c["name"]: c["last_answer"] for c in waited["workstreams"]}
        assert answers == {n.lower(): " ".join(f"{n.lower()}{i}" for i in range(10)) + " " for n in names}
        starts = [requests_with(model, f"CHILD-{n}")[0].time for n in names]
        # each child's model was asked before any had finished streaming (2 s each)
        assert max(starts) - min(starts) < 1.5, starts
        received = (
            services.tasks_received("worker", "turnstone.model_step", worker_log),
            services.tasks_received("worker2", "turnstone.model_step", second_log),
        )
        assert all(received), received  # both workers ran model steps
        # children: ordinary interactive workstreams under the coordinator, with the owner's
        kids = children_of(api, ws_id)
        assert {k["name"] for k in kids} == {"alpha", "bravo", "charlie"}
        assert all(k["kind"] == "interactive" and k["state"] == "idle" for k in kids)
        assert all(k["owner_id"] == api.workstream(ws_id)["owner_id"] for k in kids)
        _consistent(api.history(ws_id))
    finally:
        services.kill("worker2")
        services.processes.pop("worker2", None)
        services.kill("worker")
        services.processes.pop("worker", None)
        del second


def test_a_worker_killed_while_the_coordinator_waits_loses_nothing(
    api, model, services, open_socket, workdir
):
    ws_id = coordinator(api, workdir)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("spawn_workstream", {"prompt": "CHILD-SLOW: count", "name": "slow"}, id="s1")
            ]
        ),
        match=COORD,
    )
    model.enqueue(Reply(tool_calls=[ToolCall("wait_for_workstream", {"mode": "any"}, id="w1")]), match=COORD)
    model.enqueue(Reply(text="the child answered"), match=COORD)
    model.enqueue(Reply(chunks=[f"slow{i} " for i in range(40)], chunk_delay=0.1), match="CHILD-SLOW")
    model.enqueue(Reply(text="counted to forty"), match="CHILD-SLOW")
    turn_id = api.send(ws_id, f"{COORD} delegate")
    child_id = result_of(sock, "s1")["ws_id"]
    # the coordinator's turn is parked on its wait: no worker holds it
    wait_until(
        lambda: (api.workstream(ws_id)["turn"] or {}).get("phase") == "awaiting", 30, "the wait parked"
    )
    wait_until(lambda: requests_with(model, "CHILD-SLOW"), 30, "the child streaming")
    services.kill("worker")  # mid-stream of the child, mid-wait of the coordinator
    services.start_worker()
    waited = result_of(sock, "w1", timeout=90)
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    assert waited["done"] and waited["finished"] == [child_id]
    assert waited["workstreams"][0]["last_answer"] == "counted to forty"
    child_history = [(m["role"], m["content"]) for m in api.history(child_id)]
    assert child_history == [("user", "CHILD-SLOW: count"), ("assistant", "counted to forty")]
    history = api.history(ws_id)
    _consistent(history)
    assert [m["content"] for m in history if m["role"] == "assistant"][-1] == "the child answered"


def test_a_childs_approval_is_surfaced_and_decided_in_the_coordinator(api, model, open_socket, workdir):
    ws_id = coordinator(api, workdir)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("spawn_workstream", {"prompt": "CHILD-ASK: write", "folder": "shared"}, id="s1")
            ]
        ),
        match=COORD,
    )
    model.enqueue(Reply(tool_calls=[ToolCall("wait_for_workstream", {}, id="w1")]), match=COORD)
    model.enqueue(Reply(text="done"), match=COORD)
    command = "echo from-child > made.txt"
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command}, id="b1")]), match="CHILD-ASK")
    model.enqueue(Reply(text="wrote it"), match="CHILD-ASK")
    turn_id = api.send(ws_id, f"{COORD} have a child write")
    child_id = result_of(sock, "s1")["ws_id"]
    echoed = sock.wait_for(
        lambda e: e.get("type") == "subagent" and e["event"]["type"] == "approve_request", timeout=30
    )
    assert echoed["child_ws_id"] == child_id
    assert echoed["event"]["items"][0]["func_name"] == "bash"
    # once parked on its wait, the coordinator needs attention: its child's call waits for a person
    wait_until(lambda: api.workstream(ws_id)["state"] == "attention", 30, "the coordinator in attention")
    described = api.workstream(ws_id)
    assert [(p["call_id"], p["child_ws_id"]) for p in described["pending_approvals"]] == [("b1", child_id)]
    decided = api.approve(ws_id, approved=True, call_id="b1", child_ws_id=child_id)
    assert decided.status_code == 200, decided.text
    waited = result_of(sock, "w1", timeout=60)
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    assert waited["workstreams"][0]["last_answer"] == "wrote it"
    assert (workdir / "made.txt").read_text() == "from-child\n"  # the shared folder: the coordinator's
    # only what a person there decides or follows reaches the coordinator's stream
    types = {e["event"]["type"] for e in sock.of_type("subagent")}
    assert types <= {"approve_request", "approval_resolved", "state_change", "error", "cancelled"}


def test_tasks_follow_ups_and_closing_the_coordinator_closes_its_children(api, model, open_socket, workdir):
    ws_id = coordinator(api, workdir, auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("tasks", {"action": "add", "title": "survey the repo"}, id="t1"),
                ToolCall("spawn_workstream", {"prompt": "CHILD-LONG: think", "name": "long"}, id="s1"),
                ToolCall("list_nodes", {}, id="n1"),
            ]
        ),
        match=COORD,
    )
    update = {"action": "update", "task_id": 1, "status": "in_progress"}
    model.enqueue(Reply(tool_calls=[ToolCall("tasks", update, id="t2")]), match=COORD)
    model.enqueue(Reply(text="working on it"), match=COORD)
    model.enqueue(Reply(chunks=[f"t{i} " for i in range(300)], chunk_delay=0.1), match="CHILD-LONG")
    turn_id = api.send(ws_id, f"{COORD} plan")
    added = result_of(sock, "t1")
    assert added["task"]["title"] == "survey the repo" and added["task"]["status"] == "pending"
    child_id = result_of(sock, "s1")["ws_id"]
    nodes = result_of(sock, "n1")
    assert nodes["count"] >= 1 and all("@" in n["name"] for n in nodes["nodes"])
    assert sock.wait_turn_end(turn_id, timeout=60)["state"] == "idle"
    tasks = api.http.get(f"/v1/api/workstreams/{ws_id}/tasks").json()["tasks"]
    assert [(t["title"], t["status"]) for t in tasks] == [("survey the repo", "in_progress")]
    assert sock.wait_type("tasks_changed")["tasks"][0]["title"] == "survey the repo"

    wait_until(lambda: api.workstream(child_id)["state"] in ("thinking", "running"), 30, "the child working")
    closed = api.http.post(f"/v1/api/workstreams/{ws_id}/close", json={})
    assert closed.status_code == 200 and set(closed.json()["closed"]) == {ws_id, child_id}
    api.wait_idle(child_id)
    assert api.workstream(child_id)["closed"] and api.workstream(ws_id)["closed"]
    for target in (ws_id, child_id):
        refused = api.http.post(f"/v1/api/workstreams/{target}/send", json={"message": "more"})
        assert refused.status_code == 409 and "closed" in refused.json()["error"]
    again = api.http.post(f"/v1/api/workstreams/{ws_id}/close", json={})
    assert again.status_code == 200 and again.json()["closed"] == []
    deleted = api.http.delete(f"/v1/api/workstreams/{ws_id}")
    assert deleted.status_code == 200 and set(deleted.json()["deleted"]) == {ws_id, child_id}
