"""A workstream's settings after creation (PATCH), the models a person may choose from
(GET /models), and titles written from the first exchange, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from tests.fakes.model_server import DEFAULT_TITLE, Reply, ToolCall
from tests.integration.client import wait_until
from tests.integration.conftest import BOT_TOKEN

pytestmark = pytest.mark.integration


def patch(api, ws_id, body):  # type: ignore[no-untyped-def]
    return api.http.patch(f"/v1/api/workstreams/{ws_id}", json=body)


def listed(api, ws_id):  # type: ignore[no-untyped-def]
    return next(w for w in api.http.get("/v1/api/workstreams").json()["workstreams"] if w["ws_id"] == ws_id)


# -- PATCH ------------------------------------------------------------------------------------


def test_rename_pin_and_archive_are_kept_listed_and_announced(api, open_socket):
    ws_id = api.create_workstream(name="before")
    sock = open_socket(ws_id)
    fresh = listed(api, ws_id)
    assert (fresh["pinned"], fresh["archived"]) == (False, False) and fresh["last_activity_at"]
    hostile = "<img src=x onerror=alert(1)> ‮ 🙂"
    r = patch(api, ws_id, {"name": hostile, "pinned": True, "archived": True})
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["pinned"], r.json()["archived"]) == (hostile, True, True)
    shown = listed(api, ws_id)
    assert (shown["name"], shown["pinned"], shown["archived"]) == (hostile, True, True)
    event = sock.wait_type("workstream_changed")
    assert (event["name"], event["pinned"], event["archived"]) == (hostile, True, True)
    r = patch(api, ws_id, {"archived": False, "name": None})  # null: left as it is
    assert r.status_code == 200 and r.json()["archived"] is False and r.json()["name"] == hostile
    assert patch(api, ws_id, {}).json()["pinned"] is True  # nothing asked, nothing changed


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "a\u0000b"}, "name"),
        ({"name": "n" * 201}, "name"),
        ({"name": ["x"]}, "name"),
        ({"name": {"a": {"b": {}}}}, "name"),
        ({"pinned": "yes"}, "pinned"),
        ({"pinned": 1}, "pinned"),
        ({"archived": 0}, "archived"),
        ({"model": "no-such-model"}, "model"),
        ({"model": "ranker"}, "model"),  # it only reranks
        ({"model": 5}, "model"),
        ({"auto_approve": "true"}, "auto_approve"),
        ({"working_dir": "/"}, "working_dir"),  # not changeable
        ({"network": "host"}, "network"),
        ({"kind": "coordinator"}, "kind"),
    ],
)
def test_hostile_or_unchangeable_values_are_400_naming_the_field(api, body, field):
    ws_id = api.create_workstream(name="kept")
    r = patch(api, ws_id, body)
    assert r.status_code == 400 and r.json()["field"] == field, r.text
    after = api.workstream(ws_id)
    assert (after["name"], after["model"], after["pinned"]) == ("kept", None, False)


def test_a_lone_surrogate_or_a_body_that_is_no_object_is_400(api):
    ws_id = api.create_workstream(name="kept")
    for raw in (b'{"name": "\\ud800"}', b"[]", b'{"name": "x"', b"[" * 100_000):
        r = api.http.patch(
            f"/v1/api/workstreams/{ws_id}", content=raw, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400 and "error" in r.json(), raw[:20]
    assert api.workstream(ws_id)["name"] == "kept"
    assert patch(api, "nosuchworkstream", {"name": "x"}).status_code == 404
    assert api.http.patch("/v1/api/workstreams/a%00b", json={"name": "x"}).status_code == 404


def test_the_model_changes_between_turns_and_the_next_turn_uses_it(api, model, workdir):
    ws_id = api.create_workstream(name="switch", working_dir=str(workdir))
    api.send(ws_id, "first")
    api.wait_idle(ws_id)
    r = patch(api, ws_id, {"model": "claude", "auto_approve": True})
    assert r.status_code == 200 and (r.json()["model"], r.json()["auto_approve"]) == ("claude", True)
    model.history.clear()
    api.send(ws_id, "second")
    api.wait_idle(ws_id)
    assert [req.body["model"] for req in model.history] == ["fake-claude"]  # the Anthropic one now
    assert patch(api, ws_id, {"model": ""}).json()["model"] is None  # "": the default again


def test_a_running_turns_model_is_409_but_its_name_changes(api, model, open_socket, workdir):
    ws_id = api.create_workstream(name="busy", working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "true"})]))
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws_id, "run it")
    sock.wait_type("approve_request")
    for body in ({"model": "claude"}, {"auto_approve": True}, {"model": "claude", "name": "both"}):
        r = patch(api, ws_id, body)
        assert r.status_code == 409 and "turn" in r.json()["error"], r.text
    now = api.workstream(ws_id)
    assert (now["name"], now["model"], now["auto_approve"]) == ("busy", None, False)  # nothing changed
    r = patch(api, ws_id, {"name": "renamed mid-turn", "pinned": True})
    assert r.status_code == 200 and r.json()["name"] == "renamed mid-turn"
    api.approve(ws_id, approved=True)
    sock.wait_turn_end(turn_id)
    assert patch(api, ws_id, {"model": "claude"}).status_code == 200


# -- GET /models ------------------------------------------------------------------------------


def test_models_lists_the_configured_ones_with_what_each_can_do_and_no_secret(api, services):
    r = api.http.get("/v1/api/models")
    assert r.status_code == 200
    body = r.json()
    models = {m["name"]: m for m in body["models"]}
    assert body["default"] == "default" and models["default"]["default"] is True
    assert sum(m["default"] for m in body["models"]) == 1
    assert models["default"]["model"] == "fake-model" and models["default"]["chat"] is True
    assert models["claude"]["provider"] == "anthropic" and models["claude"]["vision"] is True
    assert models["vision"]["vision"] is True and models["default"]["vision"] is False
    assert models["claude_web"]["web_search"] is True and models["claude"]["web_search"] is False
    assert models["small"]["context_window"] == 7000 and models["default"]["context_window"] is None
    assert models["small"]["provider_family"] == "openai"
    assert models["ranker"]["chat"] is False and models["ranker"]["tools"] is False
    assert [m["chat"] for m in body["models"]] == sorted((m["chat"] for m in body["models"]), reverse=True)
    text = r.text
    for secret in ("sk-ant-fake-key-for-tests", "rk-fake-rerank-key", BOT_TOKEN, "127.0.0.1", "base_url"):
        assert secret not in text
    assert services.env["OPENAI_API_KEY"] not in text
    assert api.http.get("/v1/api/models?x=1").status_code == 400  # a parameter it does not take


# -- titles -----------------------------------------------------------------------------------


def test_the_first_exchange_titles_an_unnamed_workstream_with_the_titler(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    assert api.workstream(ws_id)["name"].startswith("workstream ")
    sock = open_socket(ws_id)
    model.enqueue_title(Reply(text='"Release notes for 2.0."\nand more'), match="write the release notes")
    model.enqueue(Reply(text="Here they are."))
    api.send(ws_id, "write the release notes")
    event = sock.wait_type("workstream_changed", timeout=60)
    assert event["name"] == "Release notes for 2.0"  # one line, without its quotes and full stop
    assert api.workstream(ws_id)["name"] == "Release notes for 2.0"
    [asked] = model.title_requests
    assert asked.body["model"] == "fake-vision"  # [roles] titler, not the workstream's model
    said = json.dumps(asked.body["messages"])
    assert "write the release notes" in said and "Here they are." in said
    # a side request: not in the conversation, and the turns' own requests are all in `history`
    assert [m["role"] for m in api.history(ws_id)] == ["user", "assistant"]
    assert all("You name conversations" not in json.dumps(req.body) for req in model.history)
    api.send(ws_id, "and again")  # titled once only
    api.wait_idle(ws_id)
    assert not model.wait_for_titles(2, timeout=3)
    assert api.workstream(ws_id)["name"] == "Release notes for 2.0"


def test_a_named_or_renamed_workstream_keeps_its_name(api, model, workdir):
    named = api.create_workstream(name="mine", working_dir=str(workdir))
    api.send(named, "hello")
    api.wait_idle(named)
    unnamed = api.create_workstream(working_dir=str(workdir))
    assert patch(api, unnamed, {"name": "renamed first"}).status_code == 200
    api.send(unnamed, "hello")
    api.wait_idle(unnamed)
    assert not model.wait_for_titles(1, timeout=3)
    assert api.workstream(named)["name"] == "mine"
    assert api.workstream(unnamed)["name"] == "renamed first"


def test_a_failing_title_request_leaves_the_turn_and_the_name_alone(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    default_name = api.workstream(ws_id)["name"]
    model.enqueue_title(Reply(status=500, error_message="titler down"))
    model.enqueue(Reply(text="the answer"))
    api.send(ws_id, "question")
    ws = api.wait_idle(ws_id)
    assert ws["state"] == "idle"
    assert model.wait_for_titles(1, timeout=30)
    assert [m["content"] for m in api.history(ws_id)] == ["question", "the answer"]
    wait_until(lambda: model.title_requests, what="the title request")
    api.send(ws_id, "next")  # still untitled: the next turn asks again, and the default title comes
    wait_until(lambda: api.workstream(ws_id)["name"] == DEFAULT_TITLE, timeout=60, what="the title")
    assert default_name != DEFAULT_TITLE
