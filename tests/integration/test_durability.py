"""A worker killed with SIGKILL at the worst moments: nothing lost, nothing run twice."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from app.engine.life import interruptions
from app.storage.database import IDLE_CHECK_SECONDS, Database
from app.storage.models import Turn
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import PG_ADMIN_URL
from tests.process_table import carrying, wait_until

pytestmark = pytest.mark.integration


def _consistent(history: list[dict]) -> None:
    """Every tool call has exactly one result, and results follow their calls."""
    open_calls: list[str] = []
    for message in history:
        if message["role"] == "assistant":
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = [c["id"] for c in message.get("tool_calls") or []]
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.remove(message["tool_call_id"])
    assert not open_calls


def test_worker_killed_during_the_model_stream(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(chunks=[f"slow{i} " for i in range(40)], chunk_delay=0.1))
    model.enqueue(Reply(chunks=["the ", "whole ", "answer"]))
    turn_id = api.send(ws_id, "tell me")
    sock.wait_type("content")
    services.kill("worker")
    services.start_worker()
    end = sock.wait_turn_end(turn_id, timeout=60)
    assert end["state"] == "idle"
    restart = sock.wait_type("stream_end", discard=True)
    after_restart = [e for e in sock.events if e["id"] > restart["id"] and e["type"] == "content"]
    assert "".join(e["text"] for e in after_restart) == "the whole answer"
    history = api.history(ws_id)
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "tell me"),
        ("assistant", "the whole answer"),
    ]


def test_worker_killed_during_a_bash_call_reports_it_interrupted(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    command = "echo run >> runs; echo started; sleep 4; echo done >> runs"
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
    model.enqueue(Reply(text="I will check what happened"))
    turn_id = api.send(ws_id, "long one")
    sock.wait_type("tool_output_chunk")
    services.kill("worker")
    services.start_worker()
    sock.wait_turn_end(turn_id, timeout=60)
    result = [e for e in sock.of_type("tool_result")][-1]
    assert result["is_error"] and result["output"] == interruptions.STOPPED_WITH_WORKER
    assert (workdir / "runs").read_text().count("run\n") == 1  # never run twice
    history = api.history(ws_id)
    _consistent(history)
    assert history[-1]["content"] == "I will check what happened"


def test_a_bash_command_is_stopped_with_its_killed_worker(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    # The jail's pids are its own: its processes are found by a marker in their argv, and the
    # jail itself by its folder in bwrap's (the namespace's init: once it is gone, so is the rest).
    marker = f"tj-durable-{uuid.uuid4().hex}"
    command = f"echo started; (exec -a {marker} sleep 3) & (exec -a {marker} sleep 3); touch finished"
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": command})]))
    model.enqueue(Reply(text="it was stopped"))
    turn_id = api.send(ws_id, "long one")
    sock.wait_type("tool_output_chunk")
    assert wait_until(lambda: carrying(marker) and carrying(str(workdir)), 10)  # printed before it execs
    services.kill("worker")
    # Once no process of the jail runs, nothing can create the file any more.
    assert wait_until(lambda: not carrying(marker) and not carrying(str(workdir)), 10), carrying(marker)
    assert not (workdir / "finished").exists()
    services.start_worker()
    sock.wait_turn_end(turn_id, timeout=60)
    result = sock.of_type("tool_result")[-1]
    assert result["is_error"] and result["output"] == interruptions.STOPPED_WITH_WORKER
    history = api.history(ws_id)
    _consistent(history)
    assert history[-1]["content"] == "it was stopped"


def test_worker_killed_while_parked_for_approval(api, model, services, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo once >> runs"})]))
    model.enqueue(Reply(text="ran it"))
    turn_id = api.send(ws_id, "do it once")
    sock.wait_type("approve_request")
    services.kill("worker")
    assert api.workstream(ws_id)["pending_approvals"][0]["func_name"] == "bash"
    assert api.approve(ws_id, approved=True).status_code == 200  # decided while no worker runs
    services.start_worker()
    sock.wait_turn_end(turn_id, timeout=60)
    assert (workdir / "runs").read_text() == "once\n"
    history = api.history(ws_id)
    _consistent(history)
    assert history[-1]["content"] == "ran it"


def test_a_message_stored_by_a_process_that_died_before_starting_it_still_runs(
    api, model, services, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="picked up"))
    # What `send` commits before it starts the turn; its process died in between.
    db = Database(services.db.url)
    with db.session() as s:
        s.add(Turn(id=uuid.uuid4().hex, ws_id=ws_id, message="left behind"))
    db.dispose()
    end = sock.wait_turn_end(timeout=30)  # beat's sweeper starts it
    assert end["state"] == "idle"
    assert [(m["role"], m["content"]) for m in api.history(ws_id)] == [
        ("user", "left behind"),
        ("assistant", "picked up"),
    ]


def test_a_database_that_dropped_every_connection_takes_the_next_turn(
    api, model, services, open_socket, workdir
):
    """What a PostgreSQL restart or failover does to the service's pooled connections: each one
    ends on the server, and the web, the worker and beat are not told."""
    if services.db.backend != "postgresql":
        pytest.skip("PostgreSQL's connections")
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="before"))
    sock.wait_turn_end(api.send(ws_id, "one"))
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        dropped = admin.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s",
            (services.db.name,),
        ).fetchall()
    assert len(dropped) >= 2  # the web's and the worker's, at least
    time.sleep(IDLE_CHECK_SECONDS + 0.3)  # a restart takes longer than the pool's idle check
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo after"})]))
    model.enqueue(Reply(text="it printed after"))
    end = sock.wait_turn_end(api.send(ws_id, "two"), timeout=30)
    assert end["state"] == "idle"
    assert [e["is_error"] for e in sock.of_type("tool_result")] == [False]
    assert [m["content"] for m in api.history(ws_id) if m["role"] == "assistant"][-1] == "it printed after"
