"""The job API's contract: auth, bad input, health, OpenAPI."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from app import redis_keys
from app.settings import DEFAULT_MAX_MESSAGE_BYTES
from app.taskqueue import MODEL_QUEUE
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import Api
from tests.integration.gated_after_response_worker import GATE_ENV
from tests.integration.services import API_TOKEN, free_port

pytestmark = pytest.mark.integration


def test_requests_without_a_valid_token_are_401(services):
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = httpx.get(services.base_url + "/v1/api/workstreams", headers=headers)
        assert r.status_code == 401 and "Bearer" in r.json()["error"]


def test_a_token_created_by_the_cli_works(services):
    import subprocess

    from tests.integration.services import BIN, ROOT

    def cli(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            [str(BIN / "turnstone-jobs"), *args],
            env=services.env,
            cwd=ROOT,
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    cli("user", "create", "ci", stdin="a password for ci\n")
    token = cli("token", "create", "ci").strip().splitlines()[-1]
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


def test_bad_working_dir_and_unknown_model_are_refused(api, workdir):
    # well-formed, naming a folder that is not there: 422 (the document allows any path)
    r = api.http.post("/v1/api/workstreams", json={"working_dir": str(workdir / "missing")})
    assert r.status_code == 422 and r.json()["field"] == "working_dir"
    # a model the configuration does not have: the document lists them, so it is a 400
    r = api.http.post("/v1/api/workstreams", json={"model": "no-such-model"})
    assert r.status_code == 400 and r.json()["field"] == "model"
    # the service's reranker (conftest) only reranks: it cannot hold a conversation
    r = api.http.post("/v1/api/workstreams", json={"model": "ranker"})
    assert r.status_code == 400 and "only reranks" in r.json()["error"]
    # an empty name means the default model, as it always has (and the document says so)
    spec = api.http.get("/v1/api/openapi.json").json()
    choices = spec["components"]["schemas"]["NewWorkstream"]["properties"]["model"]["anyOf"][0]["enum"]
    assert "" in choices and "ranker" not in choices
    assert (
        api.http.post("/v1/api/workstreams", json={"model": "", "working_dir": str(workdir)}).status_code
        == 201
    )


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
        "/v1/api/workstreams/{ws_id}/watches",
        "/v1/api/workstreams/{ws_id}/watches/{watch_id}",
        "/health",
    ):
        assert path in spec["paths"]


# -- reading bodies ---------------------------------------------------------------------


def test_a_json_body_sent_as_curl_d_sends_it_is_read(api, model, workdir):
    """curl -d says application/x-www-form-urlencoded: the README's example must still work."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r = api.http.post(
        "/v1/api/workstreams",
        content=json.dumps({"name": "demo", "working_dir": str(workdir)}),
        headers=form,
    )
    assert r.status_code == 201 and r.json()["name"] == "demo"
    ws_id = r.json()["ws_id"]
    model.enqueue(Reply(text="listed"), match="list the files here")
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/send", content='{"message": "list the files here"}', headers=form
    )
    assert r.status_code == 202, r.text
    api.wait_idle(ws_id)
    assert [m["content"] for m in api.history(ws_id)] == ["list the files here", "listed"]


def test_a_workstream_can_be_created_without_a_body(api):
    r = api.http.post("/v1/api/workstreams")
    assert r.status_code == 201 and r.json()["state"] == "idle"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": ""}, "message"),
        ({"message": " \n\t "}, "message"),
        ({"message": "a\u0000b"}, "message"),
        ({"message": "a\ud800b"}, "message"),
    ],
)
def test_empty_nul_or_lone_surrogate_messages_are_400_naming_the_field(api, workdir, body, field):
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/send",
        content=json.dumps(body),  # ensure_ascii: the lone surrogate travels as \ud800
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["field"] == field, r.text
    assert api.history(ws_id) == []


def test_names_past_the_column_or_holding_a_nul_are_400(api):
    r = api.http.post("/v1/api/workstreams", json={"name": "n" * 201})
    assert r.status_code == 400 and r.json()["field"] == "name"
    r = api.http.post("/v1/api/workstreams", json={"name": "a\u0000b"})
    assert r.status_code == 400 and r.json()["field"] == "name"
    r = api.http.post("/v1/api/workstreams", json={"name": "n" * 200})
    assert r.status_code == 201 and r.json()["name"] == "n" * 200


def test_deeply_nested_json_is_400(api):
    r = api.http.post(
        "/v1/api/workstreams", content=b"[" * 100_000, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["field"] == "body"


# -- what gunicorn answers itself -----------------------------------------------------


def test_405_says_which_methods_are_allowed(api):
    r = api.http.delete("/v1/api/workstreams")
    assert r.status_code == 405 and "error" in r.json()
    assert {m.strip() for m in r.headers["Allow"].split(",")} >= {"GET", "POST"}


def test_a_very_long_url_is_a_json_414(api):
    r = api.http.get("/v1/api/workstreams", params={"x": "a" * 20_000})
    assert r.status_code == 414
    assert r.headers["Content-Type"] == "application/json" and "too large" in r.json()["error"]


@pytest.mark.parametrize(
    "header",
    [b"Content-Length: abc", b"Content-Length: -1", b"Transfer-Encoding: ", b"Transfer-Encoding: gzip"],
)
def test_a_malformed_length_or_coding_is_a_json_400(services, header):
    status, headers, body = raw_exchange(
        services.base_url, b"POST /v1/api/workstreams HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n"
    )
    assert status == 400 and headers["content-type"] == "application/json"
    assert "error" in json.loads(body)


@pytest.mark.parametrize(
    ("token", "path", "status"),
    [
        (API_TOKEN, "/v1/api/workstreams/{ws}/send", 413),
        ("wrong", "/v1/api/workstreams/{ws}/send", 401),
        (API_TOKEN, "/v1/api/workstreams/nope/send", 404),  # refused before the body is parsed
        (API_TOKEN, "/v1/api/no-such-endpoint", 404),
    ],
)
def test_a_10_mb_body_is_read_before_the_answer_so_the_client_sees_it(
    services, api, workdir, token, path, status
):
    """No Expect: 100-continue, as most clients send: the whole body goes out, then the answer
    is read. Closing before reading it would be a broken pipe for the sender."""
    path = path.replace("{ws}", api.create_workstream(working_dir=str(workdir)))
    body = b'{"message": "' + b"x" * (10 * 1024 * 1024) + b'"}'
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    answered, headers, answer = raw_exchange(services.base_url, head + body)
    assert answered == status and headers["content-type"] == "application/json"
    assert json.loads(answer)["error"]


def test_a_body_shorter_than_its_content_length_is_answered_after_the_read_timeout(services):
    """A client that stops sending must not hold a server thread for ever (here the read
    timeout is 3 s, by a worker subclass; 30 s in production), and is answered once that time
    has passed, not twice (the answer used to wait for a second read of the rest, to drop it)."""
    base_url = services.start_web(
        worker_class="tests.integration.short_read_worker.ShortReadTimeoutWorker",
        name="web-short-read",
        port=free_port(),
    )
    try:
        head = (
            "POST /v1/api/workstreams HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {API_TOKEN}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100\r\n\r\n{}"
        ).encode()
        started = time.monotonic()
        status, _headers, answer = raw_exchange(base_url, head, timeout=20)
        waited = time.monotonic() - started
        assert status == 400 and json.loads(answer)["field"] == "body"
        assert 3.0 <= waited < 5.0, waited
    finally:
        services.kill("web-short-read")


@pytest.mark.parametrize("token", [API_TOKEN, "wrong"])  # a body read by the route, or only drained
def test_a_malformed_chunked_body_is_a_json_400_or_the_usual_answer(services, token):
    status, headers, body = raw_exchange(
        services.base_url,
        b"POST /v1/api/workstreams HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        + f"Authorization: Bearer {token}\r\n\r\n".encode()
        + b"zz\r\n{}\r\n0\r\n\r\n",
    )
    assert status == (400 if token == API_TOKEN else 401) and headers["content-type"] == "application/json"
    assert "error" in json.loads(body)


def raw_exchange(base_url: str, data: bytes, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """Send `data` as is on a fresh connection; the status, headers and body of the answer."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)  # a server that closed before reading makes this a broken pipe
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed before an answer: {received!r}"
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        while len(body) < int(headers.get("content-length", 0)):
            chunk = sock.recv(65536)
            assert chunk, "connection closed in the middle of the answer"
            body += chunk
    return int(lines[0].split()[1]), headers, body


# -- decisions ------------------------------------------------------------------------


def test_repeating_a_decision_without_call_id_is_a_no_op_like_with_it(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    # The call waits for a file the test writes, so its batch is still the active one.
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "while [ ! -e go ]; do sleep 0.05; done"})]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "x")
    [item] = sock.wait_type("approve_request")["items"]
    first = api.approve(ws_id, approved=True)
    assert first.status_code == 200 and first.json()["decided"] == [item["call_id"]]
    again = api.approve(ws_id, approved=True)
    assert again.status_code == 200 and again.json()["decided"] == [], again.text
    by_id = api.approve(ws_id, approved=True, call_id=item["call_id"])
    assert by_id.status_code == 200 and by_id.json()["decided"] == []
    other_way = api.approve(ws_id, approved=False)
    assert other_way.status_code == 409
    assert len(sock.of_type("approval_resolved")) == 1
    (workdir / "go").touch()
    sock.wait_turn_end(turn_id)
    r = api.approve(ws_id, approved=True)  # no active turn any more
    assert r.status_code == 409 and r.json()["pending"] == []


def test_a_decision_repeated_after_its_call_ran_is_a_no_op(api, model, open_socket, workdir):
    # A client whose answer was lost retries; by then the approved call has run and the turn
    # has ended. The same decision again changes nothing; the other one conflicts.
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo ran"})]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "x")
    [item] = sock.wait_type("approve_request")["items"]
    assert api.approve(ws_id, approved=True, call_id=item["call_id"]).json()["decided"] == [item["call_id"]]
    sock.wait_turn_end(turn_id)
    again = api.approve(ws_id, approved=True, call_id=item["call_id"])
    assert again.status_code == 200 and again.json() == {"decided": [], "pending": [], "resumed": False}
    other_way = api.approve(ws_id, approved=False, call_id=item["call_id"])
    assert other_way.status_code == 409 and "already approved" in other_way.json()["error"]
    assert len(sock.of_type("approval_resolved")) == 1


@pytest.mark.parametrize(
    ("feedback", "status"),
    [
        ("x" * (DEFAULT_MAX_MESSAGE_BYTES + 1), 413),  # one byte past a message's limit
        ("\u00e9" * (DEFAULT_MAX_MESSAGE_BYTES // 2 + 1), 413),  # past it in UTF-8, not in characters
        ("x" * (1024 * 1024), 413),  # the 1 MB the issue saw accepted
        ("a\x00b", 400),
        ("\ud800", 400),
        (12, 400),
        (["no"], 400),
        ({"deep": {"er": {}}}, 400),
    ],
    ids=["one-byte-over", "utf8-over", "1mb", "nul", "lone-surrogate", "number", "list", "object"],
)
def test_hostile_approval_feedback_is_a_json_4xx_and_decides_nothing(
    api, model, open_socket, workdir, feedback, status
):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo ran"})]))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "x")
    [item] = sock.wait_type("approve_request")["items"]
    refused = api.http.post(  # json.dumps escapes a lone surrogate as JSON may (httpx cannot encode it)
        f"/v1/api/workstreams/{ws_id}/approve", content=json.dumps({"approved": False, "feedback": feedback})
    )
    assert refused.status_code == status, refused.text[:300]
    assert refused.headers["content-type"] == "application/json" and refused.json()["field"] == "feedback"
    sock.send(
        {"type": "approve", "approved": False, "feedback": feedback, "request_id": 7}
    )  # the socket's way
    reply = sock.wait_reply()
    assert reply["status"] == status and reply["body"]["field"] == "feedback", reply
    at_limit = "y" * DEFAULT_MAX_MESSAGE_BYTES  # the limit itself is allowed
    decided = api.approve(ws_id, approved=False, feedback=at_limit)
    assert decided.status_code == 200 and decided.json()["decided"] == [item["call_id"]]
    sock.wait_turn_end(turn_id)
    result = sock.wait_type("tool_result")
    assert result["is_error"] and result["output"].startswith("Denied by user: yyy")


# -- a send's answer ---------------------------------------------------------------------


def test_a_send_is_answered_once_its_turn_is_stored_and_the_rest_follows(
    services, api, model, open_socket, workdir, tmp_path
):
    """The 202 waits for the turn to be stored and started, not for its first step to be
    queued or its events to go out: the request does those right after its answer. A web node
    whose work after an answer waits for a gate shows the order."""
    gate = tmp_path / "gate"
    gated_url = services.start_web(
        worker_class="tests.integration.gated_after_response_worker.GatedAfterResponseWorker",
        name="web-gated",
        port=free_port(),
        env={GATE_ENV: str(gate)},
    )
    try:
        ws_id = api.create_workstream(name="answered first", working_dir=str(workdir))
        sock = open_socket(ws_id)
        model.enqueue(Reply(text="after the answer"), match="stored")
        asked = len(model.history)
        turn_id = Api(gated_url, API_TOKEN).send(ws_id, "stored")
        assert api.workstream(ws_id)["active_turn_id"] == turn_id  # stored, started
        log = services.redis.xrange(redis_keys.event_log(ws_id))
        assert [e for _id, e in log if turn_id.encode() in e[b"e"]] == []  # nothing out yet
        assert services.redis.llen(MODEL_QUEUE) == 0 and len(model.history) == asked
        gate.touch()
        sock.wait_turn_end(turn_id)
        states = [e["state"] for e in sock.of_type("state_change") if e["turn_id"] == turn_id]
        assert states == ["thinking", "idle"]
        assert [m["content"] for m in api.history(ws_id)] == ["stored", "after the answer"]
    finally:
        gate.touch()
        services.kill("web-gated")


# -- idempotent sends -----------------------------------------------------------------


def test_a_send_retried_with_its_idempotency_key_stores_one_message(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="once"), match="retried")
    url = f"/v1/api/workstreams/{ws_id}/send"
    key = {"Idempotency-Key": "retry-" + ws_id}
    first = api.http.post(url, json={"message": "retried"}, headers=key)
    second = api.http.post(url, json={"message": "retried"}, headers=key)
    assert first.status_code == second.status_code == 202
    assert first.json()["turn_id"] == second.json()["turn_id"]
    sock.wait_turn_end(first.json()["turn_id"])
    # After the turn is over, the retry answers how it ended: a status the document allows.
    third = api.http.post(url, json={"message": "retried"}, headers=key)
    assert third.json() == {"turn_id": first.json()["turn_id"], "status": "done"}
    spec = httpx.get(api.base_url + "/v1/api/openapi.json").json()
    send_ok = spec["paths"]["/v1/api/workstreams/{ws_id}/send"]["post"]["responses"]["202"]
    sent = send_ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert "done" in spec["components"]["schemas"][sent]["properties"]["status"]["enum"]
    assert [m["content"] for m in api.history(ws_id)] == ["retried", "once"]


def test_the_websocket_send_takes_an_idempotency_key(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="once"), match="over the socket")
    command = {"type": "send", "message": "over the socket", "idempotency_key": "k1"}
    sock.send({**command, "request_id": 1})
    sock.send({**command, "request_id": 2})
    first, second = sock.wait_reply(), sock.wait_reply()
    assert first["status"] == second["status"] == 202
    assert first["body"]["turn_id"] == second["body"]["turn_id"]
    sock.wait_turn_end(first["body"]["turn_id"])
    assert [m["content"] for m in api.history(ws_id)] == ["over the socket", "once"]


@pytest.mark.parametrize("key", ["", "k" * 201, "caf\u00e9", "tab\there"])
def test_a_bad_idempotency_key_is_400(api, workdir, key):
    ws_id = api.create_workstream(working_dir=str(workdir))
    r = api.http.post(
        f"/v1/api/workstreams/{ws_id}/send",
        json={"message": "x"},
        headers={"Idempotency-Key": key.encode("utf-8")},
    )
    assert r.status_code == 400 and r.json()["field"] == "idempotency_key"
    assert api.history(ws_id) == []


# -- the document ---------------------------------------------------------------------


def test_the_document_is_public_and_describes_both_ways_of_giving_the_token(services):
    r = httpx.get(services.base_url + "/v1/api/openapi.json")  # no token
    assert r.status_code == 200
    spec = r.json()
    assert spec["paths"]["/v1/api/openapi.json"]["get"]["security"] == []
    schemes = spec["components"]["securitySchemes"]
    assert schemes["token"] == {**schemes["token"], "type": "apiKey", "in": "query", "name": "token"}
    create = spec["paths"]["/v1/api/workstreams"]["post"]
    assert create["requestBody"]["required"] is False
    assert {"bearer": ["write"]} in create["security"] and {"token": ["write"]} in create["security"]


def test_the_token_works_in_the_query_and_with_a_lowercase_scheme(services):
    url = services.base_url + "/v1/api/workstreams"
    assert httpx.get(url, params={"token": API_TOKEN}).status_code == 200
    assert httpx.get(url, headers={"Authorization": f"bearer {API_TOKEN}"}).status_code == 200
