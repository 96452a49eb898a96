"""Watches through the whole service: the fake model creates one, a person approves it, the real
beat's pass claims it, a real worker polls it, and its result starts a turn; restarts; the API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update
from sqlmodel import col, select

from app.storage.database import Database
from app.storage.models import Turn, Watch
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import Services

pytestmark = pytest.mark.integration


def create_call(name: str, command: str, stop_on: str | None = None, every: str = "10s") -> ToolCall:
    args = {"action": "create", "name": name, "command": command, "poll_every": every}
    if stop_on is not None:
        args["stop_on"] = stop_on
    return ToolCall("watch", args)


def create_watch(api, model, sock, ws_id: str, call: ToolCall) -> dict:  # type: ignore[no-untyped-def]
    """A turn whose model asks for the watch; a person approves it; the turn ends."""
    model.enqueue(Reply(text="I'll watch it.", tool_calls=[call]))
    model.enqueue(Reply(text="Watching."))
    turn_id = api.send(ws_id, "tell me when it is ready")
    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["func_name"] == "watch" and item["needs_approval"] is True
    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    sock.wait_turn_end(turn_id)
    return result


@pytest.fixture
def database(services: Services) -> Iterator[Database]:
    db = Database(services.db.url)
    yield db
    db.dispose()


def test_a_watch_the_model_creates_fires_through_beat_and_starts_a_turn(api, model, open_socket, workdir):
    ws_id = api.create_workstream(name="watching", working_dir=str(workdir))
    sock = open_socket(ws_id)
    call = create_call(
        "build", "echo build ready; env | grep -c _API_KEY || true", stop_on="'ready' in output"
    )
    result = create_watch(api, model, sock, ws_id, call)
    assert not result["is_error"] and result["output"].startswith("Watch 'build' created (id ")
    created = sock.wait_type("watch")["watch"]
    assert created["name"] == "build" and created["status"] == "active" and created["poll_every"] == "10s"

    # The watch's turn: the model is asked about the result, and asks for a command in turn.
    model.enqueue(
        Reply(
            text="The build is ready; checking.", tool_calls=[ToolCall("bash", {"command": "echo checked"})]
        ),
        match="[watch 'build' fired",
    )
    model.enqueue(Reply(text="All good."))
    message = sock.wait_for(lambda e: e.get("type") == "message" and e.get("origin") == "watch", timeout=60)
    assert message["content"].startswith(
        "[watch 'build' fired: its condition `'ready' in output` is true (poll 1"
    )
    assert message["content"].endswith("output:\nbuild ready\n0")  # no *_API_KEY reached the command
    fired = sock.wait_for(lambda e: e.get("type") == "watch" and e["watch"]["status"] == "fired")["watch"]
    assert fired["polls"] == 1 and fired["next_poll_at"] is None

    # Nothing is approved on the workstream's behalf: the turn the watch started waits for a person.
    pending = sock.wait_for(
        lambda e: e.get("type") == "approve_request" and e.get("turn_id") == message["turn_id"]
    )
    assert [i["func_name"] for i in pending["items"]] == ["bash"]
    assert api.workstream(ws_id)["state"] == "attention"
    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(message["turn_id"])

    watch_request = next(r for r in model.history if "[watch 'build' fired" in str(r.body["messages"]))
    assert watch_request.body["messages"][-1] == {"role": "user", "content": message["content"]}
    user_messages = [m for m in api.history(ws_id) if m["role"] == "user"]
    assert [m.get("origin") for m in user_messages] == [None, "watch"]
    listed = api.http.get(f"/v1/api/workstreams/{ws_id}/watches").json()["watches"]
    assert [(w["name"], w["status"], w["polls"]) for w in listed] == [("build", "fired", 1)]


def test_a_watch_survives_a_restart_and_an_overdue_one_polls_once(
    api, model, open_socket, workdir, services, database
):
    ws_id = api.create_workstream(name="restart", working_dir=str(workdir))
    sock = open_socket(ws_id)
    command = "echo poll >> polls.txt; test -f go && echo go || echo wait"
    create_watch(api, model, sock, ws_id, create_call("gate", command, stop_on="output == 'go'", every="1h"))
    first = sock.wait_for(lambda e: e.get("type") == "watch" and e["watch"]["polls"] == 1, timeout=60)[
        "watch"
    ]
    assert first["status"] == "active" and first["last_exit_code"] == 0

    services.kill("beat")
    services.kill("worker")
    try:
        (workdir / "go").write_text("")
        # Hours pass while nothing runs: the watch is many polls overdue.
        with database.session() as s:
            s.exec(
                update(Watch)
                .where(col(Watch.id) == first["watch_id"])
                .values(next_poll_at=datetime.now(UTC) - timedelta(hours=5))
            )
        model.enqueue(Reply(text="The gate is open."), match="[watch 'gate' fired")
    finally:
        services.start_worker()
        services.start_beat()
    message = sock.wait_for(lambda e: e.get("type") == "message" and e.get("origin") == "watch", timeout=60)
    sock.wait_turn_end(message["turn_id"])
    assert "(poll 2, every 1h)" in message["content"]
    assert (workdir / "polls.txt").read_text() == "poll\npoll\n"  # once on recovery, not once per missed hour
    with database.reader() as s:
        watch_turns = s.exec(select(Turn).where(Turn.ws_id == ws_id, Turn.origin == "watch")).all()
    assert len(watch_turns) == 1


def test_the_api_lists_and_cancels_watches(api, model, open_socket, workdir):
    ws_id = api.create_workstream(name="api", working_dir=str(workdir))
    sock = open_socket(ws_id)
    create_watch(api, model, sock, ws_id, create_call("slow", "echo same", every="1h"))
    watches = f"/v1/api/workstreams/{ws_id}/watches"
    (listed,) = api.http.get(watches).json()["watches"]
    assert listed["name"] == "slow" and listed["command"] == "echo same" and listed["status"] == "active"
    assert listed["poll_every"] == "1h" and listed["max_polls"] == 100 and listed["next_poll_at"]

    cancelled = api.http.delete(f"{watches}/{listed['watch_id']}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    event = sock.wait_for(lambda e: e.get("type") == "watch" and e["watch"]["status"] == "cancelled")
    assert event["watch"]["watch_id"] == listed["watch_id"]
    again = api.http.delete(f"{watches}/{listed['watch_id']}")
    assert again.status_code == 409 and "already ended" in again.json()["error"]
    for bad in ("0" * 32, "%00", "x" * 300, "%F0%9F%92%A9", "..%2F..%2Fetc"):
        refused = api.http.delete(f"{watches}/{bad}")
        assert refused.status_code == 404 and "error" in refused.json(), bad
    assert api.http.get("/v1/api/workstreams/" + "0" * 32 + "/watches").status_code == 404
    assert api.http.post(watches).status_code == 405
    assert api.http.get(watches, headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_the_model_lists_and_cancels_by_name_and_the_limits_are_error_items(api, model, open_socket, workdir):
    ws_id = api.create_workstream(name="limits", working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[create_call(f"w{n}", "echo same", every="1h") for n in range(5)]))
    model.enqueue(Reply(tool_calls=[create_call("w5", "echo more"), create_call("w0", "echo dup")]))
    model.enqueue(Reply(tool_calls=[ToolCall("watch", {"action": "cancel", "name": "w3"})]))
    model.enqueue(Reply(tool_calls=[ToolCall("watch", {"action": "list"})]))
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws_id, "watch six things")
    sock.wait_turn_end(turn_id, timeout=90)
    outputs = [e["output"] for e in sock.of_type("tool_result")]
    assert sum("created (id" in o for o in outputs[:5]) == 5  # five at once, on parallel threads
    limit, duplicate = outputs[5:7]
    assert (
        limit.startswith("Error: this workstream already has 5 active watches") and "the limit is 5" in limit
    )
    assert (
        duplicate == "Error: an active watch named 'w0' already exists in this workstream; pick another name"
    )
    assert outputs[7].startswith("Watch 'w3' (id ") and "cancelled after" in outputs[7]
    assert outputs[8].startswith("4 active watches:") and "- w3 " not in outputs[8]
    assert len([w for w in api.http.get(f"/v1/api/workstreams/{ws_id}/watches").json()["watches"]]) == 5
