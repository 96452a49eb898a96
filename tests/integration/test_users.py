"""Users on one service: nobody sees, follows, steers or approves another's workstream; sign-in,
its throttle, tokens over HTTP and the CLI, and who decided each call, through what."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import EventSocket, socket_refusal
from tests.integration.people import PASSWORD, People
from tests.integration.services import API_TOKEN, BIN, ROOT, Services

pytestmark = pytest.mark.integration


@pytest.fixture
def people(services: Services) -> People:
    return People(services)


@pytest.fixture
def no_throttle(services: Services) -> Iterator[None]:
    """Sign-in failures of other tests (the fuzzer's, say) counted against 127.0.0.1 are gone."""

    def clear() -> None:
        for key in services.redis.scan_iter("tj:login:*"):
            services.redis.delete(key)

    clear()
    yield
    clear()


def cli(services: Services, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "turnstone-jobs"), *args],
        env=services.env,
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- ownership ---------------------------------------------------------------------------------


def test_two_users_cannot_see_follow_steer_or_approve_each_others_workstreams(
    services, people, model, workdir
):
    alice, bob = people.user("alice"), people.user("bob")
    admin = people.user("root", admin=True)
    a, b = alice.api(services), bob.api(services)
    ws_id = a.create_workstream(name="alice's secret plan")
    bob_ws = b.create_workstream(name="bob's")
    sock = EventSocket(services.base_url, alice.tokens["all"], ws_id)
    try:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo approved-by-alice"})]))
        model.enqueue(Reply(text="done"))
        turn_id = a.send(ws_id, "run it")
        sock.wait_type("approve_request")

        # bob: not in his list, and every route answers as if it did not exist
        assert [w["ws_id"] for w in b.http.get("/v1/api/workstreams").json()["workstreams"]] == [bob_ws]
        base = f"/v1/api/workstreams/{ws_id}"
        for method, path, body in [
            ("GET", base, None),
            ("GET", base + "/history", None),
            ("POST", base + "/send", {"message": "hijack"}),
            ("POST", base + "/approve", {"approved": True}),
            ("POST", base + "/cancel", {}),
        ]:
            r = b.http.request(method, path, json=body)
            assert r.status_code == 404 and r.json()["error"] == f"no workstream {ws_id}", (path, r.text)
        refusal = socket_refusal(services.base_url, ws_id, bob.tokens["all"])
        assert refusal["type"] == "error" and refusal["status"] == 404
        assert a.workstream(ws_id)["pending_approvals"], "bob's approve must not have decided anything"

        # the admin sees both, alice only hers
        listed = {
            w["ws_id"] for w in admin.api(services).http.get("/v1/api/workstreams").json()["workstreams"]
        }
        assert {ws_id, bob_ws} <= listed
        assert [w["ws_id"] for w in a.http.get("/v1/api/workstreams").json()["workstreams"]] == [ws_id]
        assert a.workstream(ws_id)["owner_id"] == alice.user_id

        # alice decides over her websocket: recorded as hers, through the websocket
        sock.send({"type": "approve", "approved": True, "request_id": 1})
        assert sock.wait_reply()["status"] == 200
        resolved = sock.wait_type("approval_resolved")
        assert (resolved["by"], resolved["via"]) == (alice.name, "websocket")
        assert sock.wait_type("tool_result")["output"] == "approved-by-alice"
        sock.wait_turn_end(turn_id)
    finally:
        sock.close()
    [tool] = [m for m in a.history(ws_id) if m["role"] == "tool"]
    assert tool["decision"] == {
        "approved": True,
        "by": alice.name,
        "how": "user",
        "via": "websocket",
        "feedback": None,
        "rule": None,  # no policy rule decided it (docs/policies.md)
        "verdict": {"risk": "low", "reason": "only reads (echo)", "confidence": 0.8, "by": "heuristic"},
    }
    assert "hijack" not in json.dumps(a.history(ws_id))


def test_decisions_over_http_and_the_cli_record_who_and_through_what(services, people, model, workdir):
    alice = people.user("alice")
    a = alice.api(services)
    ws_id = a.create_workstream()
    sock = EventSocket(services.base_url, alice.tokens["all"], ws_id)
    try:
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo one"})]))
        model.enqueue(Reply(text="first done"))
        first = a.send(ws_id, "first")
        sock.wait_type("approve_request", turn_id=first)
        assert a.approve(ws_id, approved=True, feedback="fine").status_code == 200
        sock.wait_turn_end(first)

        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo two"})]))
        model.enqueue(Reply(text="second done"))
        second = a.send(ws_id, "second")
        sock.wait_type("approve_request", turn_id=second)
        # A byte that is not UTF-8 in argv arrives as a lone surrogate: one line, nothing decided.
        hostile = subprocess.run(
            [str(BIN / "turnstone-jobs"), "approve", ws_id, "--deny", "--feedback", b"not \xff today"],
            env=services.env,
            cwd=ROOT,
            capture_output=True,
            timeout=60,
        )
        assert (
            hostile.returncode == 1
            and b"\nturnstone-jobs: feedback: contains a lone" in b"\n" + hostile.stderr
        ), hostile
        assert b"Traceback" not in hostile.stderr
        out = cli(services, "approve", ws_id, "--deny", "--feedback", "not today", "--as", alice.name)
        assert out.returncode == 0, out.stderr
        assert "denied" in out.stdout
        resolved = sock.wait_type("approval_resolved", turn_id=second)
        assert (resolved["by"], resolved["via"], resolved["approved"]) == (alice.name, "cli", False)
        sock.wait_turn_end(second)
    finally:
        sock.close()
    decisions = [m["decision"] for m in a.history(ws_id) if m["role"] == "tool"]
    assert [(d["by"], d["via"], d["approved"], d["feedback"]) for d in decisions] == [
        (alice.name, "http", True, "fine"),
        (alice.name, "cli", False, "not today"),
    ]


def test_an_approve_only_token_decides_but_cannot_send_and_a_read_token_only_follows(
    services, people, model, workdir
):
    alice = people.user("alice")
    ws_id = alice.api(services).create_workstream()
    approver = httpx.Client(base_url=services.base_url, headers=bearer(people.token(alice, ["approve"])))
    reader = httpx.Client(base_url=services.base_url, headers=bearer(people.token(alice, ["read"])))
    r = approver.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": "x"})
    assert r.status_code == 403 and r.json() == {
        "error": "forbidden: this token lacks the 'write' scope",
        "scope": "write",
    }
    r = reader.post(f"/v1/api/workstreams/{ws_id}/approve", json={"approved": True})
    assert r.status_code == 403 and r.json()["scope"] == "approve"
    assert reader.get(f"/v1/api/workstreams/{ws_id}/history").status_code == 200
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo scoped"})]))
    model.enqueue(Reply(text="ok"))
    sock = EventSocket(services.base_url, reader.headers["Authorization"][7:], ws_id)
    try:
        alice.api(services).send(ws_id, "go")
        sock.wait_type("approve_request")
        sock.send({"type": "approve", "approved": True})
        assert sock.wait_reply()["status"] == 403
        assert (
            approver.post(f"/v1/api/workstreams/{ws_id}/approve", json={"approved": True}).status_code == 200
        )
        assert sock.wait_type("tool_result")["output"] == "scoped"
    finally:
        sock.close()


def test_a_token_revoked_while_its_sockets_are_open_stops_them(services, people, workdir):
    alice = people.user("alice")
    raw = people.token(alice)
    ws_id = alice.api(services).create_workstream()
    sock = EventSocket(services.base_url, raw, ws_id)
    idle = EventSocket(services.base_url, raw, ws_id)  # follows only: sends no command
    try:
        sock.send({"type": "cancel"})
        assert sock.wait_reply()["status"] == 409  # allowed: there is just nothing to cancel
        assert (
            httpx.delete(
                f"{services.base_url}/v1/api/tokens/{people.token_id(raw)}", headers=bearer(raw)
            ).status_code
            == 200
        )
        sock.send({"type": "cancel"})
        reply = sock.wait_reply()
        assert reply["status"] == 401 and "revoked" in reply["body"]["error"]
        assert sock.wait_type("error")["status"] == 401
        with sock._cond:  # and the server closes it: no more events for a revoked token
            assert sock._cond.wait_for(lambda: sock.closed, timeout=10)
        # the socket that only follows finds out at its next check (every 10 s)
        assert idle.wait_type("error", timeout=20)["status"] == 401
        with idle._cond:
            assert idle._cond.wait_for(lambda: idle.closed, timeout=10)
    finally:
        sock.close()
        idle.close()


# -- sign-in ---------------------------------------------------------------------------------


def test_sign_in_gives_a_short_lived_token_that_sign_out_revokes(services, people, no_throttle):
    alice = people.user("alice")
    r = httpx.post(
        services.base_url + "/v1/api/login", json={"username": alice.name, "password": "wrong password"}
    )
    assert r.status_code == 401 and r.json()["error"] == "wrong user name or password"
    r = httpx.post(
        services.base_url + "/v1/api/login", json={"username": alice.name.upper(), "password": PASSWORD}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["kind"] == "login" and body["user"] == alice.name and body["expires_at"]
    assert body["account"] == {**body["account"], "name": alice.name, "admin": False}
    token = body["token"]
    me = httpx.get(services.base_url + "/v1/api/me", headers=bearer(token)).json()
    assert (me["name"], me["scopes"], me["admin"]) == (alice.name, ["read", "write", "approve"], False)
    assert httpx.post(services.base_url + "/v1/api/logout", headers=bearer(token)).json() == {"revoked": True}
    r = httpx.get(services.base_url + "/v1/api/me", headers=bearer(token))
    assert r.status_code == 401 and "revoked" in r.json()["error"]
    # signing out with a pasted API token forgets nothing on the server: the token still works
    assert httpx.post(services.base_url + "/v1/api/logout", headers=bearer(alice.tokens["all"])).json() == {
        "revoked": False
    }
    assert httpx.get(services.base_url + "/v1/api/me", headers=bearer(alice.tokens["all"])).status_code == 200


def test_repeated_sign_in_failures_are_slowed_per_user(services, people, no_throttle):
    alice = people.user("alice")
    url = services.base_url + "/v1/api/login"
    for _ in range(5):
        assert httpx.post(url, json={"username": alice.name, "password": "guess"}).status_code == 401
    r = httpx.post(url, json={"username": alice.name, "password": PASSWORD})  # even the right one
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1 and r.json()["retry_after"] >= 1
    assert "try again" in r.json()["error"]


def test_repeated_sign_in_failures_are_slowed_per_address(services, people, no_throttle):
    alice = people.user("alice")
    url = services.base_url + "/v1/api/login"
    for i in range(5):  # a different name each time: only the address ties them together
        assert httpx.post(url, json={"username": f"nobody-{i}", "password": "guess"}).status_code == 401
    r = httpx.post(url, json={"username": alice.name, "password": PASSWORD})
    assert r.status_code == 429


def test_a_disabled_user_can_neither_sign_in_nor_use_a_token(services, people, no_throttle):
    carol = people.user("carol")
    out = cli(services, "user", "disable", carol.name)
    assert out.returncode == 0, out.stderr
    r = httpx.get(services.base_url + "/v1/api/workstreams", headers=bearer(carol.tokens["all"]))
    assert r.status_code == 401 and "disabled" in r.json()["error"]
    r = httpx.post(services.base_url + "/v1/api/login", json={"username": carol.name, "password": PASSWORD})
    assert r.status_code == 401


# -- tokens over HTTP ------------------------------------------------------------------------


def test_a_user_manages_their_own_tokens_and_only_theirs(services, people):
    alice, bob = people.user("alice"), people.user("bob")
    admin = people.user("root", admin=True)
    a = alice.api(services).http
    r = a.post("/v1/api/tokens", json={"name": "ci", "scopes": ["read"], "expires": "30d"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["scopes"] == ["read"] and made["user"] == alice.name and made["token"].startswith("tj_")
    listed = a.get("/v1/api/tokens").json()["tokens"]
    assert {t["user"] for t in listed} == {alice.name} and made["token_id"] in {t["token_id"] for t in listed}
    assert all("token" not in t and "token_hash" not in t for t in listed)  # the secret is shown once
    # not more than the token asking has
    weak = httpx.Client(base_url=services.base_url, headers=bearer(people.token(alice, ["read", "write"])))
    r = weak.post("/v1/api/tokens", json={"scopes": ["approve"]})
    assert r.status_code == 403 and r.json()["field"] == "scopes"
    r = a.post("/v1/api/tokens", json={"scopes": ["admin"]})
    assert r.status_code == 403 and "admin" in r.json()["error"]
    # bob's tokens: not found for alice, found for the admin
    bob_token = people.token_id(bob.tokens["all"])
    assert a.delete(f"/v1/api/tokens/{bob_token}").status_code == 404
    assert a.get("/v1/api/tokens", params={"user": bob.name}).status_code == 404
    root = admin.api(services).http
    assert bob_token in {
        t["token_id"] for t in root.get("/v1/api/tokens", params={"user": bob.name}).json()["tokens"]
    }
    assert root.delete(f"/v1/api/tokens/{bob_token}").status_code == 200
    assert httpx.get(services.base_url + "/v1/api/me", headers=bearer(bob.tokens["all"])).status_code == 401
    # and her own
    assert a.delete(f"/v1/api/tokens/{made['token_id']}").status_code == 200
    assert httpx.get(services.base_url + "/v1/api/me", headers=bearer(made["token"])).status_code == 401


def test_the_cli_creates_lists_and_revokes_scoped_expiring_tokens(services, workdir):
    name = "dora-cli"
    out = cli(services, "user", "create", name, stdin=PASSWORD + "\n")
    assert out.returncode == 0 and name in out.stdout, out.stderr
    assert PASSWORD not in out.stdout + out.stderr
    again = cli(services, "user", "create", name, stdin=PASSWORD + "\n")
    assert again.returncode == 1 and "exists already" in again.stderr
    assert name in cli(services, "user", "list").stdout

    out = cli(services, "token", "create", name, "--scopes", "read", "--expires", "30d")
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip().splitlines()[-1]
    assert httpx.get(services.base_url + "/v1/api/workstreams", headers=bearer(token)).status_code == 200
    r = httpx.post(services.base_url + "/v1/api/workstreams", headers=bearer(token), json={})
    assert r.status_code == 403 and r.json()["scope"] == "write"
    bad = cli(services, "token", "create", name, "--scopes", "read,sudo")
    assert bad.returncode == 1 and "sudo" in bad.stderr

    rows = [line.split("\t") for line in cli(services, "token", "list", "--user", name).stdout.splitlines()]
    [row] = [r for r in rows if r[3] == "read"]
    assert row[1] == name and row[4] == "active" and row[5] != "expires never"
    out = cli(services, "token", "revoke", row[0])
    assert out.returncode == 0, out.stderr
    r = httpx.get(services.base_url + "/v1/api/workstreams", headers=bearer(token))
    assert r.status_code == 401 and "revoked" in r.json()["error"]
    assert "revoked" in cli(services, "token", "list", "--user", name).stdout


def test_a_token_from_before_users_speaks_for_the_operator(services):
    """A token `token create NAME` made before this change has no user: it keeps its powers."""
    from sqlmodel import Session

    from app.storage.database import make_engine
    from app.storage.models import ApiToken
    from app.users.tokens import hash_token

    raw = "tj_legacy-token-for-the-operator"
    engine = make_engine(services.db.url)
    try:
        with Session(engine) as s:
            s.add(ApiToken(name="old ci", token_hash=hash_token(raw)))
            s.commit()
    finally:
        engine.dispose()
    me = httpx.get(services.base_url + "/v1/api/me", headers=bearer(raw)).json()
    assert me["name"] == "operator" and me["admin"] is True and me["user_id"] is None


# -- hostile input -----------------------------------------------------------------------------

HOSTILE_TEXT = {
    "NUL": "a\u0000b",
    "lone surrogate": "a\ud800b",
    "huge": "x" * 300_000,
    "integer": 7,
    "boolean": True,
    "array": ["a"],
    "object": {"a": 1},
}


@pytest.mark.parametrize("value", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
@pytest.mark.parametrize("name", ["username", "password"])
def test_hostile_sign_in_fields_are_a_json_400(services, no_throttle, name, value):
    body = {"username": "alice", "password": PASSWORD, name: value}
    r = httpx.post(
        services.base_url + "/v1/api/login",
        content=json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["field"] == name, r.text


@pytest.mark.parametrize(
    "raw",
    [b"", b"[]", b"{not json", b"[" * 100_000 + b"]" * 100_000, "\u00e9".encode("latin-1"), b"null"],
    ids=["empty", "array", "broken", "deep", "not utf-8", "null"],
)
def test_hostile_sign_in_bodies_are_a_json_4xx(services, no_throttle, raw):
    r = httpx.post(
        services.base_url + "/v1/api/login", content=raw, headers={"Content-Type": "application/json"}
    )
    assert 400 <= r.status_code < 500 and r.json()["error"], r.text


@pytest.mark.parametrize(
    "body, field",
    [
        ({"scopes": "read,sudo"}, "scopes"),
        ({"scopes": []}, "scopes"),
        ({"scopes": [1, 2]}, "scopes"),
        ({"scopes": ["read"] * 100}, "scopes"),
        ({"scopes": {"read": True}}, "scopes"),
        ({"scopes": ["re\u0000ad"]}, "scopes"),
        ({"name": "a\ud800"}, "name"),
        ({"name": "n" * 201}, "name"),
        ({"name": 5}, "name"),
        ({"expires": "30 days"}, "expires"),
        ({"expires": "0d"}, "expires"),
        ({"expires": "99999999d"}, "expires"),
        ({"expires": 30}, "expires"),
        ({"expires_in": -5}, "expires_in"),
        ({"expires_in": 2**80}, "expires_in"),
        ({"expires_in": True}, "expires_in"),
        ({"expires_in": "30"}, "expires_in"),
        ({"expires": "1d", "expires_in": 60}, "expires"),
        ({"user": "\u0000"}, "user"),
    ],
)
def test_hostile_token_requests_are_a_json_400(services, people, body, field):
    alice = people.user("alice")
    r = alice.api(services).http.post(
        "/v1/api/tokens", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    if field == "user":
        assert r.status_code in (400, 404) and r.json()["error"], r.text
    else:  # the field, or an item of it (scopes[1])
        named = r.json()["field"]
        # both lifetimes given is well-formed by the document (each alone is): a 422
        status = 422 if {"expires", "expires_in"} <= set(body) else 400
        assert r.status_code == status and (named == field or named.startswith(field + "[")), r.text


@pytest.mark.parametrize(
    "path",
    ["/v1/api/tokens/99999999999999999999", "/v1/api/tokens/abc", "/v1/api/tokens/-1", "/v1/api/tokens/0"],
)
def test_an_impossible_token_id_is_a_404(services, path):
    r = httpx.delete(services.base_url + path, headers=bearer(API_TOKEN))
    assert r.status_code == 404 and r.json()["error"], r.text


@pytest.mark.parametrize("name", ["Has Space", "", "x" * 65, "-leading", "a/b", "\u00e9t\u00e9", 3])
def test_a_bad_user_name_is_a_400(services, name):
    r = httpx.post(
        services.base_url + "/v1/api/users",
        headers=bearer(API_TOKEN),
        json={"name": name, "password": PASSWORD},
    )
    assert r.status_code == 400 and r.json()["field"] == "name", r.text


def test_a_token_in_the_query_that_is_huge_or_odd_is_a_401(services):
    for token in ["x" * 3000, "%00", "\u00e9"]:
        r = httpx.get(services.base_url + "/v1/api/workstreams", params={"token": token})
        assert r.status_code == 401, (token[:10], r.text)


def test_the_operator_token_names_no_user_so_it_must_say_whom_a_new_token_is_for(services):
    r = httpx.post(services.base_url + "/v1/api/tokens", headers=bearer(API_TOKEN), json={})
    assert r.status_code == 400 and r.json()["field"] == "user"
