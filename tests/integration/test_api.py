"""The job API's contract: auth, bad input, health, OpenAPI."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def test_requests_without_a_valid_token_are_401(services):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = httpx.get(services.base_url + "/v1/api/workstreams", headers=headers)
        assert r.status_code == 401 and "Bearer" in r.json()["error"]


def test_a_token_created_by_the_cli_works(services):
    import subprocess

    from tests.integration.services import BIN, ROOT

    out = subprocess.run(
        [str(BIN / "turnstone-jobs"), "token", "create", "ci"],
        env=services.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    token = out.stdout.strip().splitlines()[-1]
    r = httpx.get(services.base_url + "/v1/api/workstreams", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200


def test_non_json_body_is_400(api):
    r = api.http.post(
        "/v1/api/workstreams", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["field"] == "body"


def test_wrongly_typed_field_is_400_naming_it(api, workdir):
    r = api.http.post("/v1/api/workstreams", json={"auto_approve": "yes"})
    assert r.status_code == 400 and r.json()["field"] == "auto_approve"
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": 42})
    assert r.status_code == 400 and r.json()["field"] == "message"
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={})
    assert r.status_code == 400 and "message" in r.json()["error"]


def test_bad_working_dir_and_unknown_model_are_400(api, workdir):
    r = api.http.post("/v1/api/workstreams", json={"working_dir": str(workdir / "missing")})
    assert r.status_code == 400 and r.json()["field"] == "working_dir"
    r = api.http.post("/v1/api/workstreams", json={"model": "no-such-model"})
    assert r.status_code == 400 and r.json()["field"] == "model"


def test_unknown_workstream_is_404(api):
    assert api.http.get("/v1/api/workstreams/nope").status_code == 404
    assert api.http.post("/v1/api/workstreams/nope/send", json={"message": "x"}).status_code == 404
    assert api.http.get("/v1/api/workstreams/nope/history").status_code == 404


def test_oversized_message_is_413_and_nothing_is_stored(api, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": "x" * (256 * 1024 + 1)})
    assert r.status_code == 413 and "limit" in r.json()["error"]
    assert api.history(ws_id) == []


def test_approval_for_a_call_that_is_not_pending_is_409_naming_the_pending(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.approve(ws_id, approved=True)
    assert r.status_code == 409 and r.json()["pending"] == []
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "true"})]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "x")
    [item] = sock.wait_type("approve_request")["items"]
    r = api.approve(ws_id, approved=True, call_id="call_nope")
    assert r.status_code == 409 and r.json()["pending"] == [item["call_id"]]
    assert item["call_id"] in r.json()["error"]
    api.approve(ws_id, approved=True)
    sock.wait_turn_end(turn_id)


def test_unknown_tool_and_malformed_arguments_become_error_results(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("no_such_tool", {}), ToolCall("bash", "echo bare")]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "x")
    request = sock.wait_type("approve_request")
    unknown, bare = request["items"]
    assert unknown["error"] and "no_such_tool" in unknown["error"] and not unknown["needs_approval"]
    assert bare["needs_approval"] and "echo bare" in bare["preview"]  # primary-key fallback
    api.approve(ws_id, approved=True)
    sock.wait_turn_end(turn_id)
    results = {e["call_id"]: e for e in sock.of_type("tool_result")}
    assert results[unknown["call_id"]]["is_error"]
    assert results[bare["call_id"]]["output"] == "bare"


def test_health_reports_redis_database_and_workers(services):
    body = httpx.get(services.base_url + "/health").json()
    assert body["ok"] and body["redis"]["ok"] and body["database"]["ok"]
    assert body["workers"]["count"] >= 1
    assert body["database"]["dialect"] == services.db.backend


def test_openapi_describes_every_call(services):
    spec = httpx.get(services.base_url + "/v1/api/openapi.json").json()
    for path in (
        "/v1/api/workstreams",
        "/v1/api/workstreams/{ws_id}",
        "/v1/api/workstreams/{ws_id}/send",
        "/v1/api/workstreams/{ws_id}/approve",
        "/v1/api/workstreams/{ws_id}/cancel",
        "/v1/api/workstreams/{ws_id}/history",
        "/health",
    ):
        assert path in spec["paths"]
