"""Approvals pushed out through the running service (docs/notify.md#approvals-pushed-out): a
workstream with notify_approvals sends its owner's channels each step whose calls wait, with a
signed link; the link shows those calls without a token and decides them as the owner, once;
an altered, expired or misdirected link decides nothing."""

from __future__ import annotations

from urllib.parse import parse_qsl

import httpx
import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.people import People

pytestmark = pytest.mark.integration


def linked(services, person, topic: str) -> None:
    client = httpx.Client(
        base_url=services.base_url, headers={"Authorization": f"Bearer {person.tokens['all']}"}, timeout=30
    )
    r = client.post("/v1/api/channels", json={"channel_type": "ntfy", "topic": topic})
    assert r.status_code == 201, r.text


def link_of(message: str) -> tuple[str, dict[str, str]]:
    """The workstream and the signed query of the link in a pushed message."""
    query = dict(parse_qsl(message.split("#decide?", 1)[1].split()[0]))
    return query.pop("ws"), query


def test_a_waiting_call_reaches_its_owner_with_a_link_that_decides_it(
    services, model, open_socket, chat_platform
):
    ann = People(services).user("pushed")
    linked(services, ann, "pushed-approvals-1")
    mine = ann.api(services)
    r = mine.http.post("/v1/api/workstreams", json={"name": "deploys", "notify_approvals": True})
    assert r.status_code == 201 and r.json()["notify_approvals"] is True, r.text
    ws_id = r.json()["ws_id"]
    sock = open_socket(ws_id)
    # Scripted for this conversation alone: a model request of an earlier test's turn that is
    # still about cannot take them.
    said = "deploy the pushed build"
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo pushed-ok"}, id="p1")]), match=said)
    model.enqueue(Reply(text="done"), match=said)
    turn_id = mine.send(ws_id, said)

    try:
        (pushed,) = chat_platform.wait_for(kind="ntfy", target="pushed-approvals-1")
    except AssertionError as missing:  # say where the turn got to
        raise AssertionError(f"{missing}; {mine.workstream(ws_id)}; {mine.history(ws_id)}") from None
    assert pushed.headers["Title"] == "Approval needed"
    assert pushed.body.startswith(
        "deploys: 1 call(s) wait for your decision: $ echo pushed-ok (risk low). Decide: /#decide?"
    )
    linked_ws, query = link_of(pushed.body)
    assert linked_ws == ws_id and set(query) == {"turn", "step", "exp", "sig"}
    url = f"{services.base_url}/v1/hooks/approvals/{ws_id}"

    shown = httpx.get(url, params=query)  # no token: the signature is the permission
    assert shown.status_code == 200, shown.text
    (item,) = shown.json()["items"]
    assert item["call_id"] == "p1" and item["verdict"]["risk"] == "low" and shown.json()["name"] == "deploys"

    other = People(services).user("pushedother").api(services).create_workstream(name="not it")
    forged = [
        ({**query, "sig": "0" * 64}, url),
        ({**query, "exp": str(int(query["exp"]) + 60)}, url),  # a longer life is another signature
        ({**query, "exp": "1"}, url),  # expired
        ({**query, "step": str(int(query["step"]) + 1)}, url),
        ({**query, "turn": "\x00"}, url),
        ({**query, "step": "١"}, url),  # a digit, but not an ASCII one
        (query, f"{services.base_url}/v1/hooks/approvals/{other}"),
        ({k: v for k, v in query.items() if k != "sig"}, url),
    ]
    for params, where in forged:
        r = httpx.post(where, params=params, json={"approved": True})
        assert r.status_code in (400, 404), (params, where, r.text)
        assert "error" in r.json()
    assert api_pending(mine, ws_id) == ["p1"]  # nothing was decided
    for body in [
        '{"approved": "yes"}',
        '{"approved": true, "feedback": "\\ud800"}',
        '{"approved": true, "call_id": 5}',
        "[]",
    ]:
        r = httpx.post(url, params=query, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "error" in r.json(), (body, r.text)

    r = httpx.post(url, params=query, json={"approved": True, "feedback": "go ahead"})
    assert r.status_code == 200 and r.json()["decided"] == ["p1"], r.text
    assert sock.wait_type("tool_result", call_id="p1")["output"] == "pushed-ok"
    sock.wait_turn_end(turn_id)
    (tool,) = [m for m in mine.history(ws_id) if m["role"] == "tool"]
    assert tool["decision"]["by"] == ann.name and tool["decision"]["via"] == "link"
    assert tool["decision"]["feedback"] == "go ahead"
    again = httpx.post(url, params=query, json={"approved": False})
    assert again.status_code == 409, again.text  # decided: the link decides nothing more
    assert httpx.get(url, params=query).status_code == 409


def test_nothing_is_pushed_without_notify_approvals(services, model, open_socket, chat_platform):
    bo = People(services).user("unpushed")
    linked(services, bo, "unpushed-approvals-1")
    mine = bo.api(services)
    ws_id = mine.create_workstream(name="quiet")
    sock = open_socket(ws_id)
    said = "a quiet deploy"
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo quiet"}, id="q1")]), match=said)
    model.enqueue(Reply(text="done"), match=said)
    turn_id = mine.send(ws_id, said)
    sock.wait_type("approve_request")
    r = mine.http.patch(f"/v1/api/workstreams/{ws_id}", json={"notify_approvals": True})
    assert r.status_code == 200 and r.json()["notify_approvals"] is True  # any time; the next step on
    assert mine.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(turn_id)
    assert [p for p in chat_platform.posts if p.target == "unpushed-approvals-1"] == []


def api_pending(api, ws_id: str) -> list[str]:
    return [i["call_id"] for i in api.workstream(ws_id)["pending_approvals"]]
