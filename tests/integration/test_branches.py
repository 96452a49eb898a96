"""Branching through the running service (docs/branching.md): a rewind keeps what it takes out
and the model no longer sees it; a restore puts it back; edit and retry send again with the old
answer kept; a fork copies the conversation (and, when asked, the folder) into a workstream of
its own. Points inside a turn, busy workstreams, hostile ids and another user's workstream are
refused with nothing moved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.people import People

pytestmark = pytest.mark.integration


def user_texts(request_messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in request_messages if m["role"] == "user"]


def two_turns(api, model, sock, workdir: Path, **settings: Any) -> tuple[str, list[dict[str, Any]]]:
    """A workstream with a plain turn, then a turn with a bash call: its history."""
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True, **settings)
    s = sock(ws_id)
    model.enqueue(Reply(text="one"))
    s.wait_turn_end(api.send(ws_id, "first"))
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo ran"}, id="c1")]))
    model.enqueue(Reply(text="two"))
    s.wait_turn_end(api.send(ws_id, "second"))
    history = api.history(ws_id)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    return ws_id, history


def test_a_rewind_keeps_what_it_took_out_and_a_restore_puts_it_back(api, model, open_socket, workdir):
    ws_id, history = two_turns(api, model, open_socket, workdir)
    sock = open_socket(ws_id)
    answer_one = history[1]["id"]
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/rewind", json={"to": answer_one})
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["archived"] == 4 and done["after_message_id"] == answer_one and done["restored"] is None
    event = sock.wait_type("branch_changed")
    assert event["branch"] == done["branch"] and event["archived"] == 4
    assert [m["content"] for m in api.history(ws_id)] == ["first", "one"]

    model.enqueue(Reply(text="three"))
    sock.wait_turn_end(api.send(ws_id, "third"))
    assert user_texts(model.history[-1].body["messages"]) == ["first", "third"]  # "second" is gone

    listed = api.http.get(f"/v1/api/workstreams/{ws_id}/branches").json()["branches"]
    assert [(b["id"], b["reason"], b["message_count"], b["preview"]) for b in listed] == [
        (done["branch"], "rewind", 4, "second")
    ]
    kept = api.http.get(f"/v1/api/workstreams/{ws_id}/branches/{done['branch']}").json()
    assert [m["id"] for m in kept["messages"]] == [m["id"] for m in history[2:]]
    assert [m.get("content") for m in kept["messages"]] == [m.get("content") for m in history[2:]]

    r = api.http.post(f"/v1/api/workstreams/{ws_id}/branches/{done['branch']}/restore")
    assert r.status_code == 200, r.text
    back = r.json()
    assert back["restored"] == done["branch"] and back["archived"] == 2  # "third" and its answer
    restored = api.history(ws_id)
    assert [m["content"] for m in restored] == [m["content"] for m in history]
    assert restored[4]["tool_call_id"] == "c1" and restored[3]["tool_calls"][0]["id"] == "c1"
    listed = api.http.get(f"/v1/api/workstreams/{ws_id}/branches").json()["branches"]
    assert [(b["id"], b["reason"], b["preview"]) for b in listed] == [(back["branch"], "restore", "third")]

    model.enqueue(Reply(text="four"))
    sock.wait_turn_end(api.send(ws_id, "fourth"))
    assert user_texts(model.history[-1].body["messages"]) == ["first", "second", "fourth"]


def test_points_inside_a_turn_busy_workstreams_and_hostile_values_move_nothing(
    api, model, open_socket, workdir
):
    ws_id, history = two_turns(api, model, open_socket, workdir)
    url = f"/v1/api/workstreams/{ws_id}/rewind"
    inside = [history[2]["id"], history[3]["id"], history[4]["id"]]  # the turn with a call, mid-way
    for point in inside:
        r = api.http.post(url, json={"to": point})
        assert r.status_code == 400 and r.json()["field"] == "to", r.text
    other_ws, other = two_turns(api, model, open_socket, workdir)
    hostile = [
        ({"to": other[1]["id"]}, 404),  # another workstream's message
        ({"to": -1}, 400),
        ({"to": 2**40}, 400),
        ({"to": "3"}, 400),
        ({"to": True}, 400),
        ({"to": None}, 400),
        ({}, 400),
        ({"to": [1]}, 400),
    ]
    for body, status in hostile:
        r = api.http.post(url, json=body)
        assert r.status_code == status, (body, r.text)
        assert "error" in r.json()
    for path, status in [
        (f"/v1/api/workstreams/{ws_id}/branches/nope", 404),
        (f"/v1/api/workstreams/{ws_id}/branches/%00", 404),
        (f"/v1/api/workstreams/{ws_id}/messages/99999999999/edit", 404),
        (f"/v1/api/workstreams/{ws_id}/messages/-1/edit", 404),
        (f"/v1/api/workstreams/{ws_id}/messages/%F0%9F%98%80/edit", 404),
        (f"/v1/api/workstreams/{ws_id}/messages/{other[0]['id']}/edit", 404),
    ]:
        r = api.http.post(path, json={"message": "x"}) if path.endswith("edit") else api.http.get(path)
        assert r.status_code == status, (path, r.text)
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/messages/{history[1]['id']}/edit", json={"message": "x"})
    assert r.status_code == 400, r.text  # an answer is not edited
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/messages/{history[0]['id']}/edit", json={"message": "a\x00"}
    )
    assert r.status_code == 400, r.text

    # Busy: a turn parked on an approval holds the workstream.
    busy = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(busy)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo later"}, id="c9")]))
    api.send(busy, "wait for me")
    sock.wait_type("approve_request")
    for path, body in [("rewind", {"to": 0}), ("retry", {}), ("fork", {})]:
        r = api.http.post(f"/v1/api/workstreams/{busy}/{path}", json=body)
        assert r.status_code == 409, (path, r.text)
    assert [m["role"] for m in api.history(busy)] == ["user", "assistant"]
    assert api.http.get(f"/v1/api/workstreams/{busy}/branches").json()["branches"] == []
    assert api.history(ws_id) == history and api.history(other_ws) == other

    # Only an interactive workstream branches: the request is well formed, the workstream cannot
    # do it (422, as the document says of such a refusal; never 400, which says the body is wrong).
    coordinator = api.create_workstream(kind="coordinator", working_dir=str(workdir))
    for path, body in [("rewind", {"to": 0}), ("fork", {}), ("branches/nope/restore", {})]:
        r = api.http.post(f"/v1/api/workstreams/{coordinator}/{path}", json=body)
        assert r.status_code == 422 and "only interactive" in r.json()["error"], (path, r.text)


def test_edit_and_retry_send_again_and_keep_the_old_answer(api, model, open_socket, workdir):
    ws_id, history = two_turns(api, model, open_socket, workdir)
    sock = open_socket(ws_id)
    second = history[2]["id"]
    model.enqueue(Reply(text="two, again"))
    headers = {"Idempotency-Key": "edit-1"}
    url = f"/v1/api/workstreams/{ws_id}/messages/{second}/edit"
    r = api.http.post(url, json={"message": "second, better"}, headers=headers)
    assert r.status_code == 202, r.text
    turn_id = r.json()["turn_id"]
    sock.wait_turn_end(turn_id)
    assert user_texts(model.history[-1].body["messages"]) == ["first", "second, better"]
    again = api.http.post(url, json={"message": "second, better"}, headers=headers)
    assert again.status_code == 202 and again.json()["turn_id"] == turn_id  # the same turn, no new rewind
    branches = api.http.get(f"/v1/api/workstreams/{ws_id}/branches").json()["branches"]
    assert [(b["reason"], b["preview"], b["message_count"]) for b in branches] == [("edit", "second", 4)]

    model.enqueue(Reply(text="two, a third time"))
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/retry")
    assert r.status_code == 202, r.text
    sock.wait_turn_end(r.json()["turn_id"])
    assert [m["content"] for m in api.history(ws_id)] == [
        "first",
        "one",
        "second, better",
        "two, a third time",
    ]
    branches = api.http.get(f"/v1/api/workstreams/{ws_id}/branches").json()["branches"]
    assert [(b["reason"], b["preview"]) for b in branches] == [
        ("retry", "second, better"),
        ("edit", "second"),
    ]
    assert user_texts(model.history[-1].body["messages"]) == ["first", "second, better"]

    # Restoring the retried answer swaps two messages for two: a worker's copy of the
    # conversation, which counts its rows, must still see the change.
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/branches/{branches[0]['id']}/restore")
    assert r.status_code == 200 and r.json()["archived"] == 2, r.text
    model.enqueue(Reply(text="five"))
    sock.wait_turn_end(api.send(ws_id, "next"))
    answers = [m["content"] for m in model.history[-1].body["messages"] if m["role"] == "assistant"]
    assert answers == ["one", "two, again"]

    empty = api.create_workstream(working_dir=str(workdir))
    r = api.http.post(f"/v1/api/workstreams/{empty}/retry")
    assert r.status_code == 409 and "no message to retry" in r.json()["error"], r.text


def test_a_fork_copies_the_conversation_and_when_asked_the_folder(
    api, model, open_socket, workdir, services, tmp_path
):
    people = People(services)
    owner = people.user("forker")
    mine = owner.api(services)
    ws_id = mine.create_workstream(name="origin", auto_approve=True)  # named: no title comes to rename it
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo kept > notes.txt"}, id="c1")]))
    model.enqueue(Reply(text="written"))
    sock.wait_turn_end(mine.send(ws_id, "write a note"))
    history = mine.history(ws_id)
    origin = mine.workstream(ws_id)

    r = mine.http.post(f"/v1/api/workstreams/{ws_id}/fork", json={"name": "try b", "copy_folder": True})
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["forked_from"] == ws_id and fork["forked_at"] == history[-1]["id"] and fork["name"] == "try b"
    assert fork["working_dir"] != origin["working_dir"] and fork["owner_id"] == origin["owner_id"]
    assert (Path(fork["working_dir"]) / "notes.txt").read_text() == "kept\n"
    copied = mine.history(fork["ws_id"])
    assert [(m["role"], m["content"]) for m in copied] == [(m["role"], m["content"]) for m in history]

    fork_sock = open_socket(fork["ws_id"])
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo changed > notes.txt"}, id="c2")]))
    model.enqueue(Reply(text="changed"))
    fork_sock.wait_turn_end(mine.send(fork["ws_id"], "change it"))
    assert user_texts(model.history[-1].body["messages"]) == ["write a note", "change it"]
    assert (
        Path(origin["working_dir"]) / "notes.txt"
    ).read_text() == "kept\n"  # the origin's folder is its own
    assert mine.history(ws_id) == history

    shared = mine.http.post(f"/v1/api/workstreams/{ws_id}/fork", json={"at": history[0]["id"]})
    assert shared.status_code == 400 and shared.json()["field"] == "at"  # inside the turn
    whole = mine.http.post(f"/v1/api/workstreams/{ws_id}/fork", json={}).json()
    assert whole["working_dir"] == origin["working_dir"] and whole["name"] == f"{origin['name']} (fork)"

    stranger = people.user("stranger").api(services)
    for path in ("fork", "rewind", "retry", "branches"):
        r = (
            (stranger.http.get if path == "branches" else stranger.http.post)(
                f"/v1/api/workstreams/{ws_id}/{path}", json={"to": 0} if path == "rewind" else {}
            )
            if path != "branches"
            else stranger.http.get(f"/v1/api/workstreams/{ws_id}/branches")
        )
        assert r.status_code == 404, (path, r.text)
    assert mine.history(ws_id) == history
