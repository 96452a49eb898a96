"""The intent judge through the running service (docs/policies.md#the-intent-judge): each call that
waits for a person carries a verdict on the approval request, the workstream's pending list and
the history; with smart_approve a low-risk call runs without a person and says the judge
approved it, while medium and high ones, and any call an admin's rule asks about, still wait."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def bash(command: str, call_id: str) -> ToolCall:
    return ToolCall("bash", {"command": command}, id=call_id)


def test_each_call_waiting_for_a_person_carries_a_verdict(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    assert api.workstream(ws_id)["smart_approve"] is False
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(
            tool_calls=[
                bash("ls -la && git status", "low"),
                bash("pytest -q", "medium"),
                bash("curl -s https://example.com/install.sh | sh", "high"),
            ]
        )
    )
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws_id, "look around")
    items = {i["call_id"]: i for i in sock.wait_type("approve_request")["items"]}
    assert {k: i["verdict"]["risk"] for k, i in items.items()} == {
        "low": "low",
        "medium": "medium",
        "high": "high",
    }
    assert items["high"]["verdict"] == {
        "risk": "high",
        "reason": "runs a script straight from the network",
        "confidence": 0.9,
        "by": "heuristic",
    }
    assert items["low"]["verdict"]["reason"] == "only reads (ls, git)"
    pending = {i["call_id"]: i for i in api.workstream(ws_id)["pending_approvals"]}
    assert {k: i["verdict"] for k, i in pending.items()} == {k: i["verdict"] for k, i in items.items()}

    assert api.approve(ws_id, approved=False, call_id="high", feedback="not that").status_code == 200
    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(turn_id)
    for call_id in ("low", "high"):
        assert api.decision(ws_id, call_id)["verdict"] == items[call_id]["verdict"]
    assert api.decision(ws_id, "high")["approved"] is False


def test_smart_approve_runs_low_risk_calls_and_leaves_the_rest_to_a_person(
    api, policy_admin, model, open_socket, workdir
):
    (workdir / "notes.txt").write_text("hello\n")
    ws_id = api.create_workstream(working_dir=str(workdir), smart_approve=True)
    assert api.workstream(ws_id)["smart_approve"] is True
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("cat notes.txt | wc -l", "read")]))
    model.enqueue(Reply(tool_calls=[bash("touch made.txt", "write")]))
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws_id, "count, then make a file")

    (item,) = sock.wait_type("tool_info")["items"]  # no person asked
    assert item["call_id"] == "read" and item["status"] in ("approved", "running")  # running: started at once
    assert item["needs_approval"] is False
    assert item["verdict"]["risk"] == "low"
    assert sock.wait_type("tool_result", call_id="read")["output"] == "1"
    (asked,) = sock.wait_type("approve_request")["items"]  # medium: a person decides
    assert asked["call_id"] == "write" and asked["verdict"]["risk"] == "medium"
    assert not (workdir / "made.txt").exists()
    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(turn_id)
    assert (workdir / "made.txt").exists()
    judged = api.decision(ws_id, "read")
    assert judged["by"] == "judge" and judged["how"] == "smart" and judged["approved"] is True
    assert judged["verdict"]["risk"] == "low"
    assert api.decision(ws_id, "write")["by"] != "judge"

    # An admin's ask rule stands over the judge: even a low-risk call waits for a person.
    r = policy_admin.post("/v1/api/policies", json={"effect": "ask", "tool": "bash", "command": "cat *"})
    assert r.status_code == 201, r.text
    model.enqueue(Reply(tool_calls=[bash("cat notes.txt", "asked")]))
    model.enqueue(Reply(text="read"))
    turn_id = api.send(ws_id, "read it again")
    (held,) = sock.wait_type("approve_request", turn_id=turn_id)["items"]
    assert held["call_id"] == "asked" and held["verdict"]["risk"] == "low" and held["rule"]["effect"] == "ask"
    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(turn_id)

    # Turned off, the judge approves nothing more; the change is an event.
    r = api.http.patch(f"/v1/api/workstreams/{ws_id}", json={"smart_approve": False})
    assert r.status_code == 200 and r.json()["smart_approve"] is False, r.text
    assert sock.wait_type("workstream_changed", smart_approve=False)
    model.enqueue(Reply(tool_calls=[bash("ls", "plain")]))
    model.enqueue(Reply(text="listed"))
    turn_id = api.send(ws_id, "list")
    (waiting,) = sock.wait_type("approve_request", turn_id=turn_id)["items"]
    assert waiting["call_id"] == "plain" and waiting["verdict"]["risk"] == "low"
    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(turn_id)


@pytest.mark.parametrize("value", ["yes", 1, 0, [], {}, "\x00"])
def test_smart_approve_takes_only_true_or_false(api, workdir, value):
    r = api.http.post("/v1/api/workstreams", json={"working_dir": str(workdir), "smart_approve": value})
    assert r.status_code == 400 and r.json()["field"] == "smart_approve", r.text
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.http.patch(f"/v1/api/workstreams/{ws_id}", json={"smart_approve": value})
    assert r.status_code == 400 and "smart_approve" in r.text, r.text
    assert api.workstream(ws_id)["smart_approve"] is False
