"""A run's policy governs the sub-agents it starts (docs/runs.md): a task_agent's child and a
coordinator's child started within the run have their calls approved by it, and under
deny_unapproved a call it does not approve fails the run instead of waiting for a person."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.test_runs import start, wait

pytestmark = pytest.mark.integration


def test_a_task_agents_call_is_approved_by_the_runs_policy(api, model, workdir):
    marker = workdir / "child-ran"
    ws_id = api.create_workstream(working_dir=str(workdir))
    model.enqueue(
        Reply(tool_calls=[ToolCall("task_agent", {"prompt": "KID-OK: touch"}, id="t1")]), match="MOM-OK"
    )
    model.enqueue(Reply(text="the helper touched it"), match="MOM-OK")
    model.enqueue(
        Reply(tool_calls=[ToolCall("bash", {"command": f"touch {marker}"}, id="k1")]), match="KID-OK"
    )
    model.enqueue(Reply(text="touched"), match="KID-OK")
    policy = {"tools": ["task_agent", "bash"]}
    run = wait(api, start(api, prompt="MOM-OK delegate", workstream=ws_id, policy=policy)["run_id"], 60)
    assert run["status"] == "succeeded" and run["answer"] == "the helper touched it", run
    assert marker.exists()


def test_deny_unapproved_fails_the_run_on_a_task_agents_call_instead_of_waiting(api, model, workdir):
    marker = workdir / "never"
    ws_id = api.create_workstream(working_dir=str(workdir))
    model.enqueue(
        Reply(tool_calls=[ToolCall("task_agent", {"prompt": "KID-NO: touch"}, id="t1")]), match="MOM-NO"
    )
    model.enqueue(Reply(text="after the child"), match="MOM-NO")
    model.enqueue(
        Reply(tool_calls=[ToolCall("bash", {"command": f"touch {marker}"}, id="k1")]), match="KID-NO"
    )
    model.enqueue(Reply(text="child done"), match="KID-NO")
    policy = {"tools": ["task_agent"], "deny_unapproved": True}
    run_id = start(api, prompt="MOM-NO delegate", workstream=ws_id, policy=policy)["run_id"]
    run = wait(api, run_id, 60)
    assert run["status"] == "failed", run
    assert "sub-agent" in run["error"] and "bash" in run["error"], run["error"]
    assert not marker.exists()
    assert api.wait_idle(ws_id)["pending_approvals"] == []


def test_deny_unapproved_reaches_a_coordinators_child_started_within_the_run(api, model, workdir):
    marker = workdir / "coordinated"
    ws_id = api.create_workstream(working_dir=str(workdir), kind="coordinator")
    spawn = ToolCall("spawn_workstream", {"prompt": "KID-CO: touch", "folder": "shared"}, id="s1")
    model.enqueue(Reply(tool_calls=[spawn]), match="BOSS-CO")
    model.enqueue(Reply(tool_calls=[ToolCall("wait_for_workstream", {}, id="w1")]), match="BOSS-CO")
    model.enqueue(Reply(text="boss done"), match="BOSS-CO")
    model.enqueue(
        Reply(tool_calls=[ToolCall("bash", {"command": f"touch {marker}"}, id="k1")]), match="KID-CO"
    )
    model.enqueue(Reply(text="kid done"), match="KID-CO")
    policy = {"tools": ["spawn_workstream", "wait_for_workstream"], "deny_unapproved": True}
    run_id = start(api, prompt="BOSS-CO delegate", workstream=ws_id, policy=policy)["run_id"]
    run = wait(api, run_id, 60)
    assert run["status"] == "failed", run
    assert "sub-agent" in run["error"] and "bash" in run["error"], run["error"]
    assert not marker.exists()
    children = [
        w for w in api.http.get("/v1/api/workstreams").json()["workstreams"] if w.get("parent_id") == ws_id
    ]
    assert children, "the coordinator started a child"
    for child in children:
        assert api.wait_idle(child["ws_id"])["pending_approvals"] == []  # nobody is waited for
