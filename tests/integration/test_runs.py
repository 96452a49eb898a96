"""Runs through the running service (docs/runs.md): one call starts a turn with a contract and a
long poll sees it end; a policy approves what it names and fails the run on what it does not
(under deny_unapproved); a timeout ends the run cleanly; a cancel ends it; another user's run is
not found; hostile bodies and query values are 4xx with nothing stored."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import col

from app.storage.database import Database
from app.storage.models import Run
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.people import People
from tests.integration.services import API_TOKEN
from tests.integration.test_client_commands import cli
from turnstone_jobs import Client, ConflictError, InvalidRequestError, TimeoutError

pytestmark = pytest.mark.integration

FINAL = {"succeeded", "failed", "cancelled", "timed_out"}


def start(api, **body: Any) -> dict[str, Any]:
    r = api.http.post("/v1/api/runs", json=body)
    assert r.status_code == 202, r.text
    return dict(r.json())


def wait(api, run_id: str, seconds: int = 30) -> dict[str, Any]:
    r = api.http.get(f"/v1/api/runs/{run_id}", params={"wait": seconds}, timeout=seconds + 10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_run_is_one_call_and_a_long_poll_sees_its_end(api, model):
    model.enqueue(Reply(text="the answer", chunk_delay=0.05, chunks=["the ", "answer"]))
    started = start(api, prompt="what is it?", metadata={"ticket": "T-1", "n": [1, 2]})
    assert started["status"] in ("queued", "running") and started["ws_id"] and started["turn_id"]
    before = time.monotonic()
    run = wait(api, started["run_id"])
    assert time.monotonic() - before < 20
    assert run["status"] == "succeeded" and run["answer"] == "the answer", run
    assert run["prompt"] == "what is it?" and run["metadata"] == {"ticket": "T-1", "n": [1, 2]}
    assert run["error"] is None and run["tool_calls"] == [] and run["pending_approvals"] == []
    assert run["usage"]["output_tokens"] > 0 and run["timings"]["duration_s"] >= 0
    assert run["timings"]["ended_at"] >= run["timings"]["started_at"]
    assert api.history(run["ws_id"])[-1]["content"] == "the answer"  # a workstream like any other

    listed = api.http.get("/v1/api/runs", params={"status": "succeeded"}).json()["runs"]
    assert started["run_id"] in [r["run_id"] for r in listed]
    assert api.http.get("/v1/api/runs", params={"status": "running"}).json()["runs"] == [
        r for r in api.http.get("/v1/api/runs").json()["runs"] if r["status"] == "running"
    ]
    later = api.http.get("/v1/api/runs", params={"since": "2999-01-01T00:00:00Z"}).json()["runs"]
    assert later == []

    # A second run in the same workstream sees the first's conversation.
    model.enqueue(Reply(text="again"))
    second = start(api, prompt="and now?", workstream=run["ws_id"])
    assert second["ws_id"] == run["ws_id"]
    assert wait(api, second["run_id"])["answer"] == "again"
    assert [m["content"] for m in model.history[-1].body["messages"] if m["role"] == "user"] == [
        "what is it?",
        "and now?",
    ]


def test_a_policy_approves_what_it_names_and_waits_for_a_person_on_the_rest(api, model):
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo from-policy"}, id="c1")]))
    model.enqueue(Reply(text="ran it"))
    run = wait(api, start(api, prompt="run it", policy={"tools": ["bash"]})["run_id"])
    assert run["status"] == "succeeded" and run["answer"] == "ran it", run
    assert run["tool_calls"] == [
        {"call_id": "c1", "name": "bash", "status": "done", "is_error": False, "decided_how": "policy"}
    ]
    tool_results = [m for m in api.history(run["ws_id"]) if m["role"] == "tool"]
    assert "from-policy" in tool_results[0]["content"]

    # No policy: the call waits for a person, and the long poll returns when it does.
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo asked"}, id="c2")]))
    model.enqueue(Reply(text="after asking"))
    run_id = start(api, prompt="ask first")["run_id"]
    run = wait(api, run_id)
    assert run["status"] == "awaiting_approval", run
    assert [(p["call_id"], p["func_name"]) for p in run["pending_approvals"]] == [("c2", "bash")]
    assert api.approve(run["ws_id"], approved=True).status_code == 200
    run = wait(api, run_id)
    assert run["status"] == "succeeded" and run["answer"] == "after asking", run
    assert run["tool_calls"][0]["decided_how"] == "user"


def test_deny_unapproved_fails_the_run_and_runs_nothing(api, model, workdir):
    marker = Path(workdir) / "ran.txt"
    model.enqueue(
        Reply(
            tool_calls=[
                ToolCall("read_file", {"path": str(marker)}, id="r1"),
                ToolCall("bash", {"command": f"touch {marker}"}, id="b1"),
            ]
        )
    )
    ws_id = api.create_workstream(working_dir=str(workdir))
    run_id = start(
        api, prompt="do it", workstream=ws_id, policy={"tools": ["read_file"], "deny_unapproved": True}
    )["run_id"]
    run = wait(api, run_id)
    assert run["status"] == "failed", run
    assert "bash" in run["error"] and "denies unapproved" in run["error"], run["error"]
    assert not marker.exists()
    assert {c["call_id"]: c["status"] for c in run["tool_calls"]}["b1"] != "done"
    idle = api.wait_idle(ws_id)
    assert idle["pending_approvals"] == []
    # The workstream takes the next message as usual.
    model.enqueue(Reply(text="fine"))
    assert wait(api, start(api, prompt="next", workstream=ws_id)["run_id"])["status"] == "succeeded"


def test_a_timeout_ends_the_run_cleanly(api, model, workdir):
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "sleep 60; echo late"}, id="s1")]))
    model.enqueue(Reply(text="never"))
    before = time.monotonic()
    started = start(api, prompt="slow", timeout_s=2, policy={"auto_approve": True})
    run = wait(api, started["run_id"], seconds=40)
    assert run["status"] == "timed_out", run
    assert time.monotonic() - before < 30
    assert "timeout of 2 s" in run["error"]
    assert run["timings"]["deadline_at"] is not None
    assert api.wait_idle(run["ws_id"])["state"] == "idle"
    assert wait(api, started["run_id"], seconds=1)["status"] == "timed_out"  # it stays so


def test_a_cancel_ends_a_run_and_a_second_is_a_conflict(api, model):
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo never"}, id="x1")]))
    run_id = start(api, prompt="wait for me")["run_id"]
    assert wait(api, run_id)["status"] == "awaiting_approval"
    r = api.http.post(f"/v1/api/runs/{run_id}/cancel")
    assert r.status_code == 202, r.text
    assert wait(api, run_id)["status"] == "cancelled"
    r = api.http.post(f"/v1/api/runs/{run_id}/cancel")
    assert r.status_code == 409 and r.json()["status"] == "cancelled", r.text


def test_another_users_run_is_not_found_and_a_policy_that_approves_needs_the_approve_scope(
    api, model, services
):
    people = People(services)
    alice, bob = people.user("alice"), people.user("bob")
    mine, theirs = alice.api(services), bob.api(services)
    model.enqueue(Reply(text="hers"))
    run = wait(mine, start(mine, prompt="mine", metadata={"secret": "s"})["run_id"])
    assert run["status"] == "succeeded"
    for path in (f"/v1/api/runs/{run['run_id']}", f"/v1/api/runs/{run['run_id']}?wait=1"):
        assert theirs.http.get(path).status_code == 404
    assert theirs.http.post(f"/v1/api/runs/{run['run_id']}/cancel").status_code == 404
    assert run["run_id"] not in [r["run_id"] for r in theirs.http.get("/v1/api/runs").json()["runs"]]
    assert run["run_id"] in [r["run_id"] for r in mine.http.get("/v1/api/runs").json()["runs"]]
    r = theirs.http.post("/v1/api/runs", json={"prompt": "x", "workstream": run["ws_id"]})
    assert r.status_code == 404, r.text  # her workstream is not his to run in

    writer = type(mine)(services.base_url, people.token(alice, scopes=["read", "write"]))
    r = writer.http.post("/v1/api/runs", json={"prompt": "x", "policy": {"auto_approve": True}})
    assert r.status_code == 403 and "approve" in r.json()["error"], r.text


def test_hostile_bodies_and_query_values_are_a_4xx_and_store_nothing(api, model):
    before = api.http.get("/v1/api/runs", params={"limit": 200}).json()["runs"]
    hostile: list[tuple[Any, int]] = [
        ({}, 400),
        ({"prompt": ""}, 400),
        ({"prompt": "   "}, 400),
        ({"prompt": 5}, 400),
        ({"prompt": "a\x00b"}, 400),
        ({"prompt": "\ud800"}, 400),
        ({"prompt": "x" * (2 * 1024 * 1024)}, 413),
        ({"prompt": "x", "workstream": "nope"}, 404),
        ({"prompt": "x", "workstream": "\x00"}, 400),
        ({"prompt": "x", "workstream": 7}, 400),
        ({"prompt": "x", "model": "no-such-model"}, 400),
        ({"prompt": "x", "policy": []}, 400),
        ({"prompt": "x", "policy": {"tools": "bash"}}, 400),
        ({"prompt": "x", "policy": {"tools": [1]}}, 400),
        ({"prompt": "x", "policy": {"tools": ["a\x00"]}}, 400),
        ({"prompt": "x", "policy": {"tools": ["t"] * 201}}, 400),
        ({"prompt": "x", "policy": {"auto_approve": "yes"}}, 400),
        ({"prompt": "x", "policy": {"everything": True}}, 400),
        ({"prompt": "x", "timeout_s": 0}, 400),
        ({"prompt": "x", "timeout_s": -5}, 400),
        ({"prompt": "x", "timeout_s": 10**30}, 400),
        ({"prompt": "x", "timeout_s": 1.5}, 400),
        ({"prompt": "x", "timeout_s": True}, 400),
        ({"prompt": "x", "metadata": "m"}, 400),
        ({"prompt": "x", "metadata": {"k": "\x00"}}, 422),  # any object, by the document: its NUL is a 422
        ({"prompt": "x", "metadata": {"k": "\ud800"}}, 422),
        ({"prompt": "x", "metadata": {"\ud800": 1}}, 422),
        ({"prompt": "x", "metadata": {"k": "v" * 20000}}, 413),
        ({"prompt": "x", "metadata": {"k": {"k": {"k": {"k": [[[[[[[[1]]]]]]]]}}}}}, 202),
        ({"prompt": "x", "metadata": {"how JSON writes NUL": "\\u0000"}}, 202),  # a backslash: text
    ]
    for body, expected in hostile:
        if expected == 202:
            model.enqueue(Reply(text="ok"))
        raw = json.dumps(body)  # lone surrogates as JSON escapes, as a hostile client sends them
        r = api.http.post("/v1/api/runs", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == expected, (str(body)[:80], r.text[:200])
        assert r.headers["content-type"].startswith("application/json")
        if expected == 202:
            wait(api, r.json()["run_id"])
        else:
            assert "error" in r.json()
    for raw in (b"[]", b"null", b"{", b'"x"', b"[" * 10000 + b"]" * 10000):
        r = api.http.post("/v1/api/runs", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (raw[:20], r.text[:200])
    for params in (
        {"wait": "-1"},
        {"wait": "61"},
        {"wait": "1e3"},
        {"wait": "٣"},
        {"wait": "9" * 40},
    ):
        r = api.http.get(f"/v1/api/runs/{before[0]['run_id'] if before else 'x' * 32}", params=params)
        assert r.status_code in (400, 404), (params, r.text)
    for params in (
        {"status": "done"},
        {"status": "\x00"},
        {"since": "yesterday"},
        {"since": "\x00"},
        {"limit": "0"},
    ):
        r = api.http.get("/v1/api/runs", params=params)
        assert r.status_code == 400, (params, r.text)
    for path in ("/v1/api/runs/nope", "/v1/api/runs/%00", "/v1/api/runs/" + "a" * 40):
        assert api.http.get(path).status_code == 404
        assert api.http.post(path + "/cancel").status_code == 404
    after = api.http.get("/v1/api/runs", params={"limit": 200}).json()["runs"]
    assert len(after) == len(before) + 2  # the deep metadata's run, the backslash's, and nothing else
    assert {"how JSON writes NUL": "\\u0000"} in [r["metadata"] for r in after]  # as it was sent


def test_a_killed_worker_loses_no_runs_end(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    command = "echo run >> runs; echo started; sleep 4; echo done >> runs"
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command}, id="k1")]))
    model.enqueue(Reply(text="checked"))
    run_id = start(api, prompt="long one", workstream=ws_id, policy={"tools": ["bash"]})["run_id"]
    sock.wait_type("tool_output_chunk")
    services.kill("worker")
    assert wait(api, run_id, seconds=1)["status"] == "running"
    services.start_worker()
    run = wait(api, run_id, seconds=60)
    assert run["status"] == "succeeded" and run["answer"] == "checked", run
    assert [(c["call_id"], c["status"]) for c in run["tool_calls"]] == [("k1", "interrupted")]
    assert (workdir / "runs").read_text().count("run\n") == 1  # never run twice


def test_a_run_whose_turn_id_was_never_written_is_found_by_its_key(api, model, services):
    """The request that made the run stopped after the send, before it wrote the turn's id."""
    model.enqueue(Reply(text="found"))
    started = start(api, prompt="p")
    db = Database(services.env["DATABASE_URL"])
    with db.session() as s:
        s.exec(update(Run).where(col(Run.id) == started["run_id"]).values(turn_id=None))
    db.engine.dispose()
    run = wait(api, started["run_id"])
    assert (
        run["status"] == "succeeded" and run["answer"] == "found" and run["turn_id"] == started["turn_id"]
    ), run


def test_the_python_client_runs_waits_lists_and_cancels(services, model):
    with Client(services.base_url, API_TOKEN) as client:
        model.enqueue(Reply(text="from the client"))
        run = client.runs.create("hello", metadata={"from": "client"}).wait(timeout=30)
        assert run.ok and run.answer == "from the client" and run.raw["metadata"] == {"from": "client"}
        assert run.run_id in [r.run_id for r in client.runs.list(status="succeeded")]

        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo x"}, id="p1")]))
        waiting = client.runs.create("ask").wait(timeout=30)
        assert waiting.status == "awaiting_approval" and not waiting.is_final
        assert waiting.cancel().status in ("cancelled", "running")
        assert waiting.wait(timeout=30).status == "cancelled"
        with pytest.raises(ConflictError):
            waiting.cancel()
        with pytest.raises(InvalidRequestError):
            client.runs.create("x", timeout_s=0)

        model.enqueue(Reply(text="slow", chunks=["s", "l", "o", "w"], chunk_delay=1.0))
        slow = client.runs.create("slowly")
        with pytest.raises(TimeoutError):
            slow.wait(timeout=1)
        assert slow.wait(timeout=30).answer == "slow"


def test_run_job_on_the_command_line(services, model):
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo cli-ran"}, id="j1")]))
    model.enqueue(Reply(text="The command printed cli-ran."))
    done = cli(
        "run-job",
        "run it",
        "--allow",
        "bash",
        "--wait",
        "--json",
        "--metadata",
        '{"a": 1}',
        url=services.base_url,
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["status"] == "succeeded" and run["answer"] == "The command printed cli-ran."
    assert run["metadata"] == {"a": 1} and run["policy"]["tools"] == ["bash"]

    model.enqueue(Reply(text="plain"))
    done = cli("run-job", "again", "--workstream", run["ws_id"], "--wait", url=services.base_url)
    assert (done.returncode, done.stdout) == (0, "plain\n")

    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo no"}, id="j2")]))
    done = cli("run-job", "denied", "--deny-unapproved", "--wait", url=services.base_url)
    assert done.returncode == 1 and done.stderr.startswith("turnstone-jobs: run failed: a call needed")
    done = cli("run-job", "x", "--metadata", "[1]", url=services.base_url)
    assert done.returncode == 2
    done = cli("run-job", "x", "--timeout", "0", url=services.base_url)
    assert done.returncode == 1 and "timeout_s" in done.stderr


def test_schedules_and_webhooks_are_listed_on_the_command_line(api, services):
    r = api.http.post("/v1/api/schedules", json={"every": 3600, "prompt": "hourly check"})
    assert r.status_code == 201, r.text
    sid = r.json()["schedule_id"]
    done = cli("schedules", url=services.base_url)
    assert done.returncode == 0 and f"{sid}\t" in done.stdout and "every 3600 s\thourly check" in done.stdout
    done = cli("schedules", "--json", url=services.base_url)
    assert sid in [s["schedule_id"] for s in json.loads(done.stdout)]
    r = api.http.post("/v1/api/webhooks", json={"url": "https://example.com/cli", "events": ["run.failed"]})
    assert r.status_code == 201, r.text
    done = cli("webhooks", url=services.base_url)
    assert done.returncode == 0 and "https://example.com/cli\trun.failed" in done.stdout
    api.http.delete(f"/v1/api/schedules/{sid}")
    api.http.delete(f"/v1/api/webhooks/{r.json()['endpoint_id']}")
