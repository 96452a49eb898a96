"""A user's own password change, and an admin disabling and enabling users, over the API: what
ends at once, what keeps working, and hostile values refused with a JSON 4xx."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.client import EventSocket
from tests.integration.people import PASSWORD, People
from tests.integration.services import API_TOKEN, Services
from tests.integration.test_users import cli

pytestmark = pytest.mark.integration

NEW_PASSWORD = "a longer passphrase, changed"
HOSTILE_TEXT = {
    "NUL": "a\u0000bcdefghi",
    "lone surrogate": "a\ud800bcdefghi",
    "huge": "x" * 300_000,
    "integer": 7,
    "boolean": True,
    "array": ["a"],
    "object": {"a": 1},
    "null": None,
}


@pytest.fixture
def people(services: Services) -> Iterator[People]:
    def clear() -> None:  # sign-in failures counted against 127.0.0.1 by other tests
        for key in services.redis.scan_iter("tj:login:*"):
            services.redis.delete(key)

    clear()
    yield People(services)
    clear()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sign_in(services: Services, name: str, password: str) -> httpx.Response:
    return httpx.post(services.base_url + "/v1/api/login", json={"username": name, "password": password})


def post_raw(services: Services, path: str, token: str, body: object, method: str = "POST") -> httpx.Response:
    return httpx.request(
        method,
        services.base_url + path,
        content=json.dumps(body),
        headers={**bearer(token), "Content-Type": "application/json"},
        timeout=30,
    )


def me(services: Services, token: str) -> int:
    return httpx.get(services.base_url + "/v1/api/me", headers=bearer(token)).status_code


# -- changing one's password --------------------------------------------------------------------


def test_a_password_change_ends_other_sign_ins_and_keeps_this_one_and_api_tokens(services, people):
    alice = people.user("alice")
    here, elsewhere = (sign_in(services, alice.name, PASSWORD).json()["token"] for _ in range(2))
    api_token = alice.tokens["all"]
    r = post_raw(services, "/v1/api/me/password", here, {"current": PASSWORD, "new": NEW_PASSWORD})
    assert r.status_code == 200, r.text
    assert r.json() == {"changed": True, "sign_ins_ended": 1, "api_tokens_kept": 1}
    assert me(services, here) == 200 and me(services, api_token) == 200
    r = httpx.get(services.base_url + "/v1/api/me", headers=bearer(elsewhere))
    assert r.status_code == 401 and "revoked" in r.json()["error"]
    assert sign_in(services, alice.name, PASSWORD).status_code == 401
    assert sign_in(services, alice.name, NEW_PASSWORD).status_code == 200


def test_a_wrong_current_password_is_refused_without_saying_more_and_counts_as_a_failure(services, people):
    alice = people.user("alice")
    token = alice.tokens["all"]
    r = post_raw(services, "/v1/api/me/password", token, {"current": "not it at all", "new": NEW_PASSWORD})
    assert r.status_code == 403 and r.json() == {"error": "current: wrong password", "field": "current"}
    assert sign_in(services, alice.name, PASSWORD).status_code == 200  # nothing changed
    for _ in range(5):
        post_raw(services, "/v1/api/me/password", token, {"current": "guess", "new": NEW_PASSWORD})
    r = post_raw(services, "/v1/api/me/password", token, {"current": PASSWORD, "new": NEW_PASSWORD})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1, r.text  # guessing is slowed here too
    assert me(services, token) == 200  # and the token still works: a 401 would sign the page out


@pytest.mark.parametrize(
    "new, status",
    [("short", 400), ("x" * 1025, 400), ("eight\u0000chars", 422), ("eight\ud800chars", 400)],
    ids=["too short", "too long", "NUL", "lone surrogate"],
)
def test_a_new_password_follows_the_password_rule(services, people, new, status):
    alice = people.user("alice")
    r = post_raw(services, "/v1/api/me/password", alice.tokens["all"], {"current": PASSWORD, "new": new})
    assert r.status_code == status and r.json()["field"] == "new", r.text
    assert sign_in(services, alice.name, PASSWORD).status_code == 200


@pytest.mark.parametrize("value", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
@pytest.mark.parametrize("field", ["current", "new"])
def test_hostile_password_change_fields_are_a_json_400(services, people, field, value):
    alice = people.user("alice")
    body = {"current": PASSWORD, "new": NEW_PASSWORD, field: value}
    r = post_raw(services, "/v1/api/me/password", alice.tokens["all"], body)
    # a NUL in a new password is refused by the password rule, as at user creation: a 422
    status = 422 if (field, value) == ("new", HOSTILE_TEXT["NUL"]) else 400
    assert r.status_code == status and r.json()["field"] == field, r.text


@pytest.mark.parametrize(
    "raw", [b"", b"[]", b"{not json", b"[" * 100_000, b'{"current": "a", "current": {"a": ' * 5000, b"null"]
)
def test_hostile_password_change_bodies_are_a_json_4xx(services, people, raw):
    alice = people.user("alice")
    r = httpx.post(
        services.base_url + "/v1/api/me/password",
        content=raw,
        headers={**bearer(alice.tokens["all"]), "Content-Type": "application/json"},
    )
    assert 400 <= r.status_code < 500 and r.json()["error"], r.text


def test_the_operator_has_no_password_to_change(services):
    r = post_raw(services, "/v1/api/me/password", API_TOKEN, {"current": PASSWORD, "new": NEW_PASSWORD})
    assert r.status_code == 400 and r.json()["error"]


# -- an admin disables and enables users --------------------------------------------------------


def test_an_admin_disables_a_user_whose_tokens_stop_at_once_then_enables_them(services, people):
    root, carol = people.user("root", admin=True), people.user("carol")
    login = sign_in(services, carol.name, PASSWORD).json()["token"]
    admin = root.tokens["all"]
    r = post_raw(services, f"/v1/api/users/{carol.name}", admin, {"disabled": True}, "PATCH")
    assert r.status_code == 200 and r.json()["disabled"] is True and r.json()["name"] == carol.name, r.text
    for token in (carol.tokens["all"], login):
        r = httpx.get(services.base_url + "/v1/api/workstreams", headers=bearer(token))
        assert r.status_code == 401 and "disabled" in r.json()["error"]
    assert sign_in(services, carol.name, PASSWORD).status_code == 401
    listed = httpx.get(services.base_url + "/v1/api/users", headers=bearer(admin)).json()["users"]
    assert [u["disabled"] for u in listed if u["name"] == carol.name] == [True]
    # twice is no error; enabled again, her tokens work again
    r = post_raw(services, f"/v1/api/users/{carol.name}", admin, {"disabled": True}, "PATCH")
    assert r.status_code == 200 and r.json()["disabled"] is True
    r = post_raw(services, f"/v1/api/users/{carol.name.upper()}", admin, {"disabled": False}, "PATCH")
    assert r.status_code == 200 and r.json()["disabled"] is False
    assert me(services, carol.tokens["all"]) == 200 and me(services, login) == 200


def test_disabling_a_user_closes_their_open_sockets(services, people):
    root, carol = people.user("root", admin=True), people.user("carol")
    ws_id = carol.api(services).create_workstream()
    sock = EventSocket(services.base_url, carol.tokens["all"], ws_id)
    try:
        sock.send({"type": "cancel"})
        assert sock.wait_reply()["status"] == 409  # allowed: nothing to cancel
        r = post_raw(services, f"/v1/api/users/{carol.name}", root.tokens["all"], {"disabled": True}, "PATCH")
        assert r.status_code == 200
        sock.send({"type": "cancel"})
        reply = sock.wait_reply()
        assert reply["status"] == 401 and "disabled" in reply["body"]["error"]
        with sock._cond:
            assert sock._cond.wait_for(lambda: sock.closed, timeout=10)
    finally:
        sock.close()


def test_the_cli_enables_a_user_the_api_disabled(services, people):
    carol = people.user("carol")
    r = post_raw(services, f"/v1/api/users/{carol.name}", API_TOKEN, {"disabled": True}, "PATCH")
    assert r.status_code == 200 and me(services, carol.tokens["all"]) == 401
    out = cli(services, "user", "enable", carol.name)
    assert out.returncode == 0 and f"enabled user {carol.name}" in out.stdout, out.stderr
    assert me(services, carol.tokens["all"]) == 200
    out = cli(services, "user", "enable", "nobody-at-all")
    assert out.returncode == 1 and "no user" in out.stderr


def test_an_admin_cannot_disable_themself_and_a_user_cannot_disable_anyone(services, people):
    root, carol = people.user("root", admin=True), people.user("carol")
    r = post_raw(services, f"/v1/api/users/{root.name}", root.tokens["all"], {"disabled": True}, "PATCH")
    assert r.status_code == 422 and r.json()["field"] == "disabled", r.text
    assert me(services, root.tokens["all"]) == 200
    r = post_raw(services, f"/v1/api/users/{root.name}", carol.tokens["all"], {"disabled": True}, "PATCH")
    assert r.status_code == 403 and r.json()["scope"] == "admin"
    # the operator (no user) may disable an admin
    r = post_raw(services, f"/v1/api/users/{root.name}", API_TOKEN, {"disabled": True}, "PATCH")
    assert r.status_code == 200 and me(services, root.tokens["all"]) == 401


NOT_BOOLEAN = {**{k: v for k, v in HOSTILE_TEXT.items() if k != "boolean"}, "string": "true", "one": 1}


@pytest.mark.parametrize("value", NOT_BOOLEAN.values(), ids=NOT_BOOLEAN.keys())
def test_hostile_user_changes_are_a_json_400(services, people, value):
    carol = people.user("carol")
    if value is None:  # null: no change asked for, the account as it is
        r = post_raw(services, f"/v1/api/users/{carol.name}", API_TOKEN, {"disabled": value}, "PATCH")
        assert r.status_code == 200 and r.json()["disabled"] is False
        return
    r = post_raw(services, f"/v1/api/users/{carol.name}", API_TOKEN, {"disabled": value}, "PATCH")
    assert r.status_code == 400 and r.json()["field"] == "disabled", r.text


@pytest.mark.parametrize("name", ["nobody-here", "a%00b", "w" * 3000, "%ED%A0%80", "%FF%FE", "Has%20Space"])
def test_changing_a_user_who_cannot_exist_is_a_json_404(services, name):
    r = post_raw(services, f"/v1/api/users/{name}", API_TOKEN, {"disabled": True}, "PATCH")
    assert r.status_code == 404 and r.json()["error"], r.text


@pytest.mark.parametrize("raw", [b"[]", b"{not json", b"[" * 100_000, b'{"disabled": ' * 50_000, b'"x"'])
def test_hostile_user_change_bodies_are_a_json_4xx(services, people, raw):
    carol = people.user("carol")
    r = httpx.patch(
        services.base_url + f"/v1/api/users/{carol.name}",
        content=raw,
        headers={**bearer(API_TOKEN), "Content-Type": "application/json"},
    )
    assert 400 <= r.status_code < 500 and r.json()["error"], r.text
