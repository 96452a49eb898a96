"""Two web nodes and two Celery workers on one Redis and one PostgreSQL, as a scaled-out service
runs: a client on node A follows, approves and cancels a turn sent through node B; a worker
killed mid-turn leaves the other to finish it, nothing lost and no command run twice."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlmodel import Session, select

from app.engine.life import interruptions
from app.storage.database import make_engine
from app.storage.models import ToolCall as StoredCall
from app.taskqueue import MODEL_STEP_TASK, TOOL_BATCH_TASK
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.integration.client import Api, EventSocket, socket_refusal
from tests.integration.services import API_TOKEN, PG_ADMIN_URL, Services, free_port, postgres_available
from tests.integration.test_durability import _consistent

pytestmark = pytest.mark.integration

WORKERS = ("worker", "worker-2")


@dataclass
class Cluster:
    services: Services
    node_a: str
    node_b: str

    def runner_key(self, call_id: str) -> str:
        """Which of the two workers ran the call (its row names the process)."""
        with Session(make_engine(self.services.db.url)) as s:
            row = s.exec(select(StoredCall).where(StoredCall.call_id == call_id)).one()
        pid = int(str(row.runner).rsplit(":", 1)[1])
        return next(k for k in WORKERS if self.services.processes[k].pid == pid)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, model_server: FakeModelServer) -> Iterator[Cluster]:
    if not postgres_available():  # raises under CI
        pytest.skip(f"PostgreSQL is not reachable at {PG_ADMIN_URL} (set TEST_PG_ADMIN_URL)")
    svc = Services("postgresql", tmp_path_factory.mktemp("scale-out"), model_server.openai_base_url)
    try:
        svc.start()  # node A, the first worker, beat
        node_b = svc.start_web(name="web-b", port=free_port())
        svc.start_worker(WORKERS[1])
        yield Cluster(svc, svc.base_url, node_b)
    finally:
        svc.stop()


@pytest.fixture(autouse=True)
def _both_workers(cluster: Cluster) -> Iterator[None]:
    yield
    for key in WORKERS:
        if key not in cluster.services.processes:
            cluster.services.start_worker(key)


def command(sock: EventSocket, type_: str, **body: object) -> dict:
    sock.send({"type": type_, "request_id": type_, **body})
    reply = sock.wait_reply()
    assert reply["status"] in (200, 202), reply
    return dict(reply["body"])


def test_a_turn_sent_through_b_is_followed_approved_and_cancelled_on_a(cluster, model, tmp_path: Path):
    on_a, on_b = Api(cluster.node_a, API_TOKEN), Api(cluster.node_b, API_TOKEN)
    ws_id = on_b.create_workstream(name="across nodes", working_dir=str(tmp_path))
    sock = EventSocket(cluster.node_a, API_TOKEN, ws_id)
    try:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo first >> ran"})]))
        model.enqueue(
            Reply(tool_calls=[ToolCall("bash", {"command": "echo started; sleep 30; touch never"})])
        )
        turn_id = on_b.send(ws_id, "two commands")

        first = sock.wait_type("approve_request", turn_id=turn_id)
        command(sock, "approve", approved=True, call_id=first["items"][0]["call_id"])
        done = sock.wait_type("tool_result", call_id=first["items"][0]["call_id"])
        assert not done["is_error"] and (tmp_path / "ran").read_text() == "first\n"

        second = sock.wait_for(lambda e: e["type"] == "approve_request" and e["id"] > first["id"])
        command(sock, "approve", approved=True)
        sock.wait_type("tool_output_chunk", call_id=second["items"][0]["call_id"])
        command(sock, "cancel")
        end = sock.wait_turn_end(turn_id)
        assert end["state"] == "idle"
        assert sock.wait_type("cancelled", turn_id=turn_id)
    finally:
        sock.close()
    assert not (tmp_path / "never").exists()
    # Node B tells the same story as node A saw.
    assert on_b.workstream(ws_id)["state"] == "idle"
    history = on_b.history(ws_id)
    assert history == on_a.history(ws_id)
    _consistent(history)
    assert (tmp_path / "ran").read_text() == "first\n"  # run once, whichever worker took each step


def test_a_worker_killed_mid_turn_leaves_the_other_to_finish_it(cluster, model, tmp_path: Path):
    on_a, on_b = Api(cluster.node_a, API_TOKEN), Api(cluster.node_b, API_TOKEN)
    ws_id = on_b.create_workstream(name="killed", working_dir=str(tmp_path), auto_approve=True)
    sock = EventSocket(cluster.node_a, API_TOKEN, ws_id)
    try:
        slow = "echo run >> runs; echo started; sleep 4; echo done >> runs"
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": slow})]))
        model.enqueue(Reply(text="checked what happened"))
        turn_id = on_b.send(ws_id, "a long one")
        chunk = sock.wait_type("tool_output_chunk")
        victim = cluster.runner_key(chunk["call_id"])
        survivor = next(k for k in WORKERS if k != victim)
        since = cluster.services.log_size(survivor)
        cluster.services.kill(victim)  # SIGKILL; no worker is started in its place

        end = sock.wait_turn_end(turn_id, timeout=90)
        assert end["state"] == "idle"
        result = sock.of_type("tool_result")[-1]
        assert result["is_error"] and result["output"] == interruptions.STOPPED_WITH_WORKER
    finally:
        sock.close()
    assert (tmp_path / "runs").read_text().count("run\n") == 1  # never run twice
    history = on_a.history(ws_id)
    _consistent(history)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1]["content"] == "checked what happened"
    assert survivor in cluster.services.processes
    # The sweeper re-sent the dead worker's batch; the survivor took it and ran the turn's
    # last step after it, in the same task (app/engine/running/chain.py).
    assert cluster.services.tasks_received(survivor, TOOL_BATCH_TASK, since)


def test_a_worker_killed_mid_stream_leaves_the_other_to_answer(cluster, model, tmp_path: Path):
    on_a, on_b = Api(cluster.node_a, API_TOKEN), Api(cluster.node_b, API_TOKEN)
    ws_id = on_a.create_workstream(name="stream", working_dir=str(tmp_path))
    sock = EventSocket(cluster.node_b, API_TOKEN, ws_id)
    try:
        model.enqueue(Reply(chunks=[f"slow{i} " for i in range(60)], chunk_delay=0.1))
        model.enqueue(Reply(chunks=["the ", "whole ", "answer"]))
        sizes = {k: cluster.services.log_size(k) for k in WORKERS}
        turn_id = on_a.send(ws_id, "tell me")
        sock.wait_type("content")
        # The worker streaming it is killed: the other must take the step over.
        took_step = [k for k in WORKERS if cluster.services.tasks_received(k, MODEL_STEP_TASK, sizes[k])]
        (victim,) = took_step
        cluster.services.kill(victim)
        sock.wait_turn_end(turn_id, timeout=90)
        restart = sock.wait_type("stream_end", discard=True)
        after = [e for e in sock.events if e["id"] > restart["id"] and e["type"] == "content"]
        assert "".join(e["text"] for e in after) == "the whole answer"
    finally:
        sock.close()
    assert [(m["role"], m["content"]) for m in on_b.history(ws_id)] == [
        ("user", "tell me"),
        ("assistant", "the whole answer"),
    ]


def test_a_workstream_deleted_through_a_is_gone_on_b_which_knew_its_owner(cluster, tmp_path: Path):
    """Node B keeps the owners of workstreams it has served (app/users/known_owners.py); one
    deleted through node A must still be a 404 on every route of B, the websocket's too."""
    on_a, on_b = Api(cluster.node_a, API_TOKEN), Api(cluster.node_b, API_TOKEN)
    ws_id = on_a.create_workstream(name="deleted elsewhere", working_dir=str(tmp_path))
    base = f"/v1/api/workstreams/{ws_id}"
    routes = [
        ("GET", base, None),
        ("GET", base + "/history", None),
        ("POST", base + "/send", {"message": "are you there?"}),
        ("POST", base + "/approve", {"approved": True}),
        ("POST", base + "/cancel", {}),
        ("GET", base + "/watches", None),
        ("DELETE", base + "/watches/w1", None),
        ("GET", base + "/attachments", None),
        ("GET", base + "/previews", None),
        ("DELETE", base, None),
    ]
    assert on_b.workstream(ws_id)["name"] == "deleted elsewhere"  # B reads its owner, and keeps it
    assert on_a.http.delete(base).status_code == 200

    for method, path, body in routes:
        r = on_b.http.request(method, path, json=body)
        assert (r.status_code, r.json()["error"]) == (404, f"no workstream {ws_id}"), (method, path, r.text)
    refusal = socket_refusal(cluster.node_b, ws_id, API_TOKEN)
    assert (refusal["type"], refusal["status"]) == ("error", 404)
