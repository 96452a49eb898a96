"""Tool policies through the running service (docs/policies.md): an admin's deny stops a call
under auto-approve and the model is told which rule; ask waits for a person even under
auto-approve; allow lets a call run unasked; a user's rules are theirs alone; command patterns;
sub-agents are governed too; hostile patterns and rules are 4xx; the CLI edits the same rules."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import httpx
import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import wait_until
from tests.integration.people import People
from tests.integration.services import BIN

pytestmark = pytest.mark.integration


def bash(command: str, call_id: str | None = None) -> ToolCall:
    return ToolCall("bash", {"command": command}, id=call_id)


def add(policy_admin: httpx.Client, **body: Any) -> dict[str, Any]:
    r = policy_admin.post("/v1/api/policies", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def test_deny_stops_a_call_under_auto_approve_and_names_the_rule(
    api, policy_admin, model, open_socket, workdir
):
    rule = add(policy_admin, effect="deny", tool="bash", command="rm -rf /*", reason="never wipe a root")
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    (workdir / "keep").write_text("x")
    model.enqueue(Reply(tool_calls=[bash(f"cd {workdir} &&  rm -rf /{workdir.relative_to('/')}/keep", "d1")]))
    model.enqueue(Reply(text="understood"))
    turn_id = api.send(ws_id, "clean up")
    result = sock.wait_type("tool_result", call_id="d1")
    sock.wait_turn_end(turn_id)
    expected = f'Denied by policy rule {rule["id"]} (deny bash command "rm -rf /*"): never wipe a root'
    assert result["output"] == expected and result["is_error"] is True
    assert (workdir / "keep").exists()
    assert not sock.of_type("approve_request")
    info = sock.wait_type("tool_info")["items"][0]
    assert info["status"] == "denied" and info["rule"]["id"] == rule["id"]
    sent = model.history[-1].body["messages"][-1]
    assert sent == {"role": "tool", "tool_call_id": "d1", "content": expected}
    recorded = api.decision(ws_id, "d1")
    assert recorded["approved"] is False and recorded["by"] == "policy" and recorded["how"] == "rule"
    assert recorded["rule"] == {
        "id": rule["id"],
        "effect": "deny",
        "tool": "bash",
        "command": "rm -rf /*",
        "user": None,
        "group": None,
        "reason": "never wipe a root",
    }
    # deleted, the rule no longer applies: the next step's calls are decided without it
    assert policy_admin.delete(f"/v1/api/policies/{rule['id']}").json() == {"deleted": rule["id"]}
    model.enqueue(Reply(tool_calls=[bash("rm -rf /nonexistent-tj-dir", "d2")]))
    model.enqueue(Reply(text="done"))
    sock.wait_turn_end(api.send(ws_id, "again"))
    assert api.decision(ws_id, "d2") == {}  # auto-approved, as the workstream says


def test_ask_waits_for_a_person_even_under_auto_approve_and_always(
    api, policy_admin, model, open_socket, workdir
):
    rule = add(policy_admin, effect="ask", tool="bash", command="git push*")
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo plain", "a0"), bash("echo pushing; git  push origin", "a1")]))
    model.enqueue(Reply(text="pushed"))
    turn_id = api.send(ws_id, "push it")
    request = sock.wait_type("approve_request")
    by_id = {i["call_id"]: i for i in request["items"]}
    assert by_id["a1"]["status"] == "pending" and by_id["a1"]["rule"]["id"] == rule["id"]
    assert by_id["a0"]["status"] == "approved" and by_id["a0"]["rule"] is None  # auto-approved
    assert api.workstream(ws_id)["state"] == "attention"
    assert api.approve(ws_id, approved=True, call_id="a1", always=True).status_code == 200
    sock.wait_turn_end(turn_id)
    recorded = api.decision(ws_id, "a1")
    assert recorded["approved"] is True and recorded["how"] == "always"
    assert recorded["rule"]["effect"] == "ask" and recorded["rule"]["id"] == rule["id"]
    # "always" put bash in the workstream's set; the rule still asks
    model.enqueue(Reply(tool_calls=[bash("git push", "a2")]))
    second = api.send(ws_id, "again")
    assert sock.wait_type("approve_request", turn_id=second)["items"][0]["call_id"] == "a2"
    assert api.approve(ws_id, approved=False, feedback="not now").status_code == 200
    sock.wait_turn_end(second)


def test_allow_runs_a_call_without_asking_and_records_the_rule(
    api, policy_admin, model, open_socket, workdir
):
    rule = add(policy_admin, effect="allow", tool="bash", command="echo *")
    ws_id = api.create_workstream(working_dir=str(workdir))  # no auto-approve
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo allowed", "w1")]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "say it")
    assert sock.wait_type("tool_result", call_id="w1")["output"] == "allowed"
    sock.wait_turn_end(turn_id)
    assert not sock.of_type("approve_request")
    recorded = api.decision(ws_id, "w1")
    assert recorded["by"] == "policy" and recorded["how"] == "rule" and recorded["rule"]["id"] == rule["id"]
    # an allow rule covers a script only when every simple command in it matches
    model.enqueue(Reply(tool_calls=[bash("echo a; touch sneaky", "w2")]))
    second = api.send(ws_id, "again")
    assert sock.wait_type("approve_request", turn_id=second)["items"][0]["call_id"] == "w2"
    assert api.approve(ws_id, approved=False).status_code == 200
    sock.wait_turn_end(second)
    assert not (workdir / "sneaky").exists()


def test_a_users_rules_are_theirs_and_come_before_everyones(services, policy_admin, model, workdir):
    people = People(services)
    alice, bob = people.user("alice"), people.user("bob")
    add(policy_admin, effect="ask", tool="b?sh")
    add(policy_admin, effect="allow", tool="bash", user=alice.name)
    alice_api, bob_api = alice.api(services), bob.api(services)
    for who, api in (("alice", alice_api), ("bob", bob_api)):
        ws_id = api.create_workstream(auto_approve=True)
        model.enqueue(Reply(tool_calls=[bash(f"echo {who}", f"u-{who}")]), match=f"from {who}")
        model.enqueue(Reply(text="ok"), match=f"u-{who}")
        api.send(ws_id, f"from {who}")
        if who == "bob":  # everyone's ask stands over bob's auto-approve
            pending = _wait_pending(api, ws_id)
            assert [p["call_id"] for p in pending] == ["u-bob"]
            assert api.approve(ws_id, approved=True).status_code == 200
        api.wait_idle(ws_id)
        recorded = api.decision(ws_id, f"u-{who}")
        assert recorded["rule"]["effect"] == ("allow" if who == "alice" else "ask")
        assert recorded["rule"]["user"] == (alice.name if who == "alice" else None)


def test_a_groups_rules_govern_its_members_only_between_their_own_and_everyones(
    services, policy_admin, model, workdir
):
    people = People(services)
    carol, dave = people.user("carol"), people.user("dave")
    r = policy_admin.patch(f"/v1/api/users/{carol.name}", json={"groups": ["Ops", "oncall", "ops"]})
    assert r.status_code == 200 and r.json()["groups"] == ["oncall", "ops"], r.text  # lower case, once
    add(policy_admin, effect="ask", tool="bash")  # everyone's
    group_rule = add(policy_admin, effect="allow", tool="bash", group="ops")
    assert group_rule["group"] == "ops" and group_rule["user"] is None
    add(policy_admin, effect="deny", tool="bash", command="rm *", group="nobody-in-it")
    for who, api in (("carol", carol.api(services)), ("dave", dave.api(services))):
        ws_id = api.create_workstream()
        model.enqueue(Reply(tool_calls=[bash(f"rm -f x-{who}", f"g-{who}")]), match=f"from {who}")
        model.enqueue(Reply(text="ok"), match=f"g-{who}")
        api.send(ws_id, f"from {who}")
        if who == "dave":  # not in ops: everyone's ask
            assert [p["call_id"] for p in _wait_pending(api, ws_id)] == ["g-dave"]
            assert api.approve(ws_id, approved=True).status_code == 200
        api.wait_idle(ws_id)
        recorded = api.decision(ws_id, f"g-{who}")
        assert recorded["rule"]["effect"] == ("allow" if who == "carol" else "ask"), recorded
        assert recorded["rule"]["group"] == ("ops" if who == "carol" else None)

    # Out of the group, carol meets everyone's rules again from her next step.
    assert policy_admin.patch(f"/v1/api/users/{carol.name}", json={"groups": []}).json()["groups"] == []
    api = carol.api(services)
    ws_id = api.create_workstream()
    model.enqueue(Reply(tool_calls=[bash("ls", "g-after")]), match="again")
    model.enqueue(Reply(text="ok"), match="g-after")
    api.send(ws_id, "again")
    assert [p["call_id"] for p in _wait_pending(api, ws_id)] == ["g-after"]
    assert api.approve(ws_id, approved=False).status_code == 200
    api.wait_idle(ws_id)

    hostile_rules = [
        {"effect": "allow", "tool": "bash", "group": "ops", "user": carol.name},  # one or the other
        {"effect": "allow", "tool": "bash", "group": "a b"},
        {"effect": "allow", "tool": "bash", "group": "\x00"},
        {"effect": "allow", "tool": "bash", "group": ["ops"]},
        {"effect": "allow", "tool": "bash", "group": "x" * 65},
    ]
    for body in hostile_rules:
        r = policy_admin.post("/v1/api/policies", json=body)
        assert r.status_code in (400, 422) and r.json()["field"] == "group", (body, r.text)
    for groups in (["a b"], ["\x00"], "ops", [5], ["g"] * 3 + [f"g{n}" for n in range(40)], [["ops"]]):
        r = policy_admin.patch(f"/v1/api/users/{carol.name}", json={"groups": groups})
        assert r.status_code in (400, 422) and "groups" in r.text, (groups, r.text)
    assert policy_admin.get("/v1/api/users").json()  # still answering
    not_admin = carol.api(services).http.patch(f"/v1/api/users/{carol.name}", json={"groups": ["admins"]})
    assert not_admin.status_code == 403


def _wait_pending(api, ws_id: str) -> list[dict[str, Any]]:
    return list(wait_until(lambda: api.workstream(ws_id)["pending_approvals"], 30, "a pending call"))


def test_a_sub_agent_is_governed_by_its_owners_rules(api, policy_admin, model, open_socket, workdir):
    rule = add(policy_admin, effect="deny", tool="bash", command="touch *")
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("task_agent", {"prompt": "CHILD-POLICY: make it"}, id="t1")]))
    model.enqueue(Reply(tool_calls=[bash(f"touch {workdir}/child-made", "c1")]), match="CHILD-POLICY")
    model.enqueue(Reply(text="the policy refused"), match="Denied by policy rule")
    model.enqueue(Reply(text="parent done"))
    turn_id = api.send(ws_id, "delegate")
    assert sock.wait_turn_end(turn_id, timeout=90)["state"] == "idle"
    assert not (workdir / "child-made").exists()
    child_results = [e["event"] for e in sock.of_type("subagent") if e["event"]["type"] == "tool_result"]
    assert child_results and child_results[0]["output"].startswith(f"Denied by policy rule {rule['id']}")


def test_hostile_rules_are_refused_with_a_json_4xx_and_nothing_stored(services, policy_admin):
    before = policy_admin.get("/v1/api/policies").json()["policies"]
    refused = {
        "no effect": {"tool": "bash"},
        "unknown effect": {"effect": "maybe", "tool": "bash"},
        "effect not text": {"effect": 1, "tool": "bash"},
        "NUL in tool": {"effect": "deny", "tool": "ba\u0000sh"},
        "regex in tool": {"effect": "deny", "tool": "ba(s|h)+"},
        "long tool": {"effect": "deny", "tool": "b" * 201},
        "NUL in command": {"effect": "deny", "tool": "bash", "command": "rm\u0000"},
        "blank command": {"effect": "deny", "tool": "bash", "command": " \t "},
        "huge command": {"effect": "deny", "tool": "bash", "command": "x" * 100_000},
        "lone surrogate": {"effect": "deny", "tool": "bash", "command": "\ud800"},
        "nested": {"effect": "deny", "tool": "bash", "command": {"a": [[[["x"]]]]}},
        "list": {"effect": "deny", "tool": ["bash"]},
        "unknown key": {"effect": "deny", "tool": "bash", "pattern": "x"},
        "bad user name": {"effect": "deny", "tool": "bash", "user": "../admin"},
        "long reason": {"effect": "deny", "tool": "bash", "reason": "r" * 501},
    }
    for what, body in refused.items():
        r = policy_admin.post(
            "/v1/api/policies", content=_json(body), headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400 and r.json()["error"], (what, r.status_code, r.text)
    unusable = {
        "too many stars": {"effect": "deny", "tool": "bash", "command": "*a" * 33},
        "nobody's name": {"effect": "deny", "tool": "bash", "user": "no-such-user-tj"},
    }
    for what, body in unusable.items():
        r = policy_admin.post("/v1/api/policies", json=body)
        assert r.status_code == 422 and r.json()["field"] in ("command", "user"), (what, r.text)
    for raw in ("a%00b", "w" * 3000, "%ED%A0%80", "no-such-rule"):
        assert policy_admin.delete(f"/v1/api/policies/{raw}").status_code == 404
    assert policy_admin.get("/v1/api/policies").json()["policies"] == before
    # a pattern built to be slow is matched in time (the service answers; nothing backtracks)
    add(policy_admin, effect="deny", tool="*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?x", command="*a" * 32 + "b")
    person = People(services).user("plain")
    r = httpx.get(
        services.base_url + "/v1/api/policies", headers={"Authorization": f"Bearer {person.tokens['all']}"}
    )
    assert r.status_code == 403 and r.json()["scope"] == "admin"


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode("utf-8", "surrogatepass")


def test_the_cli_adds_lists_and_deletes_rules_the_api_sees(services, policy_admin):
    env = {**os.environ, "DATABASE_URL": services.db.url}
    env.pop("TURNSTONE_CONFIG", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "turnstone-jobs"), "policy", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=services.tmp,
        )

    added = cli("add", "ask", "mcp__git__*", "--reason", "a person looks at git")
    assert added.returncode == 0, added.stderr
    rule_id = added.stdout.split()[1]
    listed = {r["id"]: r for r in policy_admin.get("/v1/api/policies").json()["policies"]}
    assert listed[rule_id]["effect"] == "ask" and listed[rule_id]["tool"] == "mcp__git__*"
    assert listed[rule_id]["created_by"] == "operator"
    assert rule_id in cli("list").stdout
    refused = cli("add", "deny", "bash", "--command", "*x" * 33)
    assert refused.returncode == 1 and "at most 32" in refused.stderr
    assert cli("delete", rule_id).returncode == 0
    assert rule_id not in {r["id"] for r in policy_admin.get("/v1/api/policies").json()["policies"]}
    gone = cli("delete", rule_id)
    assert gone.returncode == 1 and "no policy rule" in gone.stderr

    # A group's rule, and the group's members, from the command line too.
    grouped = cli("add", "deny", "web_*", "--group", "interns")
    assert grouped.returncode == 0 and "group interns" in grouped.stdout, grouped.stderr
    both = cli("add", "deny", "web_*", "--group", "interns", "--user", "someone")
    assert both.returncode == 2 and "not allowed with" in both.stderr
    member = People(services).user("intern")
    joined = subprocess.run(
        [str(BIN / "turnstone-jobs"), "user", "groups", member.name, "interns", "Readers"],
        env=env, capture_output=True, text=True, timeout=120, cwd=services.tmp,
    )  # fmt: skip
    assert joined.returncode == 0 and joined.stdout.strip() == f"user {member.name}: groups interns, readers"
    users = {u["name"]: u for u in policy_admin.get("/v1/api/users").json()["users"]}
    assert users[member.name]["groups"] == ["interns", "readers"]


def test_a_coordinators_child_is_governed_too(api, policy_admin, model, open_socket, workdir):
    rule = add(policy_admin, effect="deny", tool="bash", command="echo from-child*")
    mark = "COORD-POLICY"
    ws_id = api.create_workstream(kind="coordinator", working_dir=str(workdir))
    sock = open_socket(ws_id)
    spawn = ToolCall("spawn_workstream", {"prompt": "CHILD-GOVERNED: write", "folder": "shared"}, id="s1")
    model.enqueue(Reply(tool_calls=[spawn]), match=mark)
    model.enqueue(Reply(tool_calls=[ToolCall("wait_for_workstream", {}, id="w1")]), match=mark)
    model.enqueue(Reply(text="done"), match=mark)
    model.enqueue(Reply(tool_calls=[bash("echo from-child > made.txt", "b1")]), match="CHILD-GOVERNED")
    model.enqueue(Reply(text="the policy refused it"), match="CHILD-GOVERNED")
    turn_id = api.send(ws_id, f"{mark} have a child write")
    assert sock.wait_turn_end(turn_id, timeout=90)["state"] == "idle"
    waited = json.loads(sock.wait_type("tool_result", call_id="w1")["output"])
    child_id = waited["workstreams"][0]["ws_id"]
    assert waited["workstreams"][0]["last_answer"] == "the policy refused it"
    assert not [e for e in sock.of_type("subagent") if e["event"]["type"] == "approve_request"]
    assert not (workdir / "made.txt").exists()
    recorded = api.decision(child_id, "b1")
    assert recorded["approved"] is False and recorded["rule"]["id"] == rule["id"]


def test_always_on_one_asked_call_leaves_the_other_asked_calls_waiting(
    api, policy_admin, model, open_socket, workdir
):
    """'Always' approves the calls of the batch its label covers, but a call a rule asks about
    waits for its own decision: the rule asked for a person for each one."""
    add(policy_admin, effect="ask", tool="bash", command="git push*")
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[bash("git push origin a", "p1"), bash("git push origin b", "p2")]))
    model.enqueue(Reply(text="pushed"))
    turn_id = api.send(ws_id, "push both")
    sock.wait_type("approve_request")
    decided = api.approve(ws_id, approved=True, call_id="p1", always=True)
    assert decided.status_code == 200 and decided.json()["decided"] == ["p1"], decided.text
    assert [p["call_id"] for p in api.workstream(ws_id)["pending_approvals"]] == ["p2"]
    assert api.approve(ws_id, approved=False, call_id="p2").status_code == 200
    sock.wait_turn_end(turn_id)
