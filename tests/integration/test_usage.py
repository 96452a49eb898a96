"""Usage through the running service: `GET /v1/api/usage` adds up stored token counts by day,
model or user with their cost from `[prices]`, shows a user only their own, refuses hostile
filters with a JSON 4xx; `turnstone-jobs usage` prints the same table."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import Api
from tests.integration.conftest import BUDGETED_USER, CLAUDE_PRICE
from tests.integration.people import PASSWORD, People, Person
from tests.integration.services import API_TOKEN, BIN
from tests.process_table import wait_until

pytestmark = pytest.mark.integration


def _turn(api, model, open_socket, ws_id: str, text: str) -> None:
    model.enqueue(Reply(text=text, input_tokens=1000, output_tokens=200))
    open_socket(ws_id).wait_turn_end(api.send(ws_id, "hello"))


def test_usage_by_model_and_day_adds_up_the_steps_and_prices_them(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), model="claude")
    for n in range(2):
        _turn(api, model, open_socket, ws_id, f"answer {n}")
    r = api.http.get("/v1/api/usage", params={"workstream": ws_id, "group_by": "model"})
    assert r.status_code == 200, r.text
    [row] = r.json()["rows"]
    assert row["model"] == "claude" and row["steps"] == 2
    assert (row["input_tokens"], row["output_tokens"]) == (2000, 400)
    expected = (2000 * CLAUDE_PRICE["input"] + 400 * CLAUDE_PRICE["output"]) / 1_000_000
    assert row["cost"] == pytest.approx(expected) and row["unpriced_steps"] == 0
    assert r.json()["total"]["cost"] == pytest.approx(expected)
    today = datetime.now(UTC).date()
    by_day = api.http.get("/v1/api/usage", params={"workstream": ws_id, "from": str(today), "to": str(today)})
    assert [d["day"] for d in by_day.json()["rows"]] == [today.isoformat()]
    tomorrow = str(today + timedelta(days=1))
    later = api.http.get("/v1/api/usage", params={"workstream": ws_id, "from": tomorrow})
    assert later.json()["rows"] == [] and later.json()["total"]["steps"] == 0
    unpriced = api.create_workstream(working_dir=str(workdir))  # the default model has no price
    _turn(api, model, open_socket, unpriced, "free")
    free = api.http.get("/v1/api/usage", params={"workstream": unpriced}).json()["total"]
    assert free["unpriced_steps"] == 1 and free["cost"] == 0


def test_a_user_sees_only_their_own_usage_and_an_admin_everyones(services, model, open_socket, workdir):
    people = People(services)
    alice, bob, root = people.user("alice"), people.user("bob"), people.user("root", admin=True)
    as_alice, as_bob, as_root = (p.api(services) for p in (alice, bob, root))
    mine = as_alice.create_workstream()
    model.enqueue(Reply(text="hi alice", input_tokens=10, output_tokens=5))
    as_alice.http.post(f"/v1/api/workstreams/{mine}/send", json={"message": "hi"})
    assert wait_until(lambda: any(m["role"] == "assistant" for m in as_alice.history(mine)), 30)
    assert wait_until(lambda: as_alice.workstream(mine)["state"] == "idle", 30)
    own = as_alice.http.get("/v1/api/usage", params={"group_by": "user"}).json()["rows"]
    assert [(r["user"], r["input_tokens"]) for r in own] == [(alice.name, 10)]
    assert as_bob.http.get("/v1/api/usage").json()["total"]["steps"] == 0
    other = as_bob.http.get("/v1/api/usage", params={"user": alice.name})
    assert other.status_code == 403 and other.json()["error"]
    assert as_bob.http.get("/v1/api/usage", params={"workstream": mine}).status_code == 404
    seen = as_root.http.get("/v1/api/usage", params={"user": alice.name, "group_by": "user"}).json()["rows"]
    assert [(r["user"], r["input_tokens"]) for r in seen] == [(alice.name, 10)]
    everyone = {
        r["user"] for r in as_root.http.get("/v1/api/usage", params={"group_by": "user"}).json()["rows"]
    }
    assert alice.name in everyone
    assert as_root.http.get("/v1/api/usage", params={"user": "nobody-at-all"}).status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        "group_by=week",
        "group_by=day%00",
        "from=yesterday",
        "to=2026-13-45",
        "from=%ED%A0%80",  # a lone surrogate's UTF-8 form: not UTF-8
        "user=%00",
        "user=" + "x" * 100,
        "workstream=%00",
        "workstream=" + "w" * 40,
        "from=" + "9" * 5000,
        "group_by=day&group_by=%FF",
    ],
)
def test_hostile_usage_filters_are_a_json_4xx(api, query):
    r = api.http.get(f"/v1/api/usage?{query}")
    assert 400 <= r.status_code < 500 and r.json()["error"], r.text


def test_the_usage_command_prints_the_table(api, model, open_socket, workdir, services):
    ws_id = api.create_workstream(working_dir=str(workdir), model="claude")
    _turn(api, model, open_socket, ws_id, "counted")
    env = {**os.environ, "TURNSTONE_URL": services.base_url, "TURNSTONE_TOKEN": API_TOKEN}
    done = subprocess.run(
        [str(BIN / "turnstone-jobs"), "usage", "--group-by", "model", "--workstream", ws_id],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    head, row, total = done.stdout.splitlines()
    assert head.split()[:3] == ["model", "input", "output"]
    assert row.split()[:3] == ["claude", "1,000", "200"] and total.split()[0] == "total"
    assert row.split()[-1] == f"{(1000 * 3.0 + 200 * 15.0) / 1_000_000:.4f}"
    bad = subprocess.run(
        [str(BIN / "turnstone-jobs"), "usage", "--from", "never"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "from" in bad.stderr


def _budgeted(services) -> Api:
    """The user with a budget of BUDGETED_TOKENS a day (made once per service)."""
    people = People(services)
    made = people.operator.post("/v1/api/users", json={"name": BUDGETED_USER, "password": PASSWORD})
    assert made.status_code in (201, 409), made.text
    person = Person(BUDGETED_USER, "", admin=False)
    return Api(services.base_url, people.token(person))


def test_a_turn_that_crosses_its_users_budget_stops_and_the_next_is_refused_429(
    services, model, open_socket, workdir, chat_platform
):
    # an admin with a channel hears of it, once
    admin = People(services).user("budget-admin", admin=True)
    hook = httpx.Client(
        base_url=services.base_url, headers={"Authorization": f"Bearer {admin.tokens['all']}"}
    )
    linked = hook.post(
        "/v1/api/channels", json={"channel_type": "webhook", "url": chat_platform.webhook_url("budgets")}
    )
    assert linked.status_code == 201, linked.text
    as_user = _budgeted(services)
    ws_id = as_user.create_workstream(auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo spent"})], input_tokens=900, output_tokens=150)
    )
    model.enqueue(Reply(text="never asked"))
    url, key = f"/v1/api/workstreams/{ws_id}/send", {"Idempotency-Key": "spend-1"}
    turn_id = as_user.http.post(url, json={"message": "spend it"}, headers=key).json()["turn_id"]
    assert sock.wait_turn_end(turn_id)["state"] == "error"
    notice = sock.wait_type("error", turn_id=turn_id)["message"]
    assert (
        "Stopped before step 2" in notice
        and "daily budget of 1000 tokens" in notice
        and "resets at" in notice
    )
    history = as_user.history(ws_id)
    assert history[-1]["role"] == "tool" and history[-1]["content"] == "spent"  # its step finished
    assert len([r for r in model.history if r.body]) == 1  # the next step was never asked for
    refused = as_user.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": "more"})
    assert refused.status_code == 429, refused.text
    body = refused.json()
    tomorrow = datetime.now(UTC).date() + timedelta(days=1)
    assert body["budget"] == "tokens_per_day" and body["resets_at"].startswith(tomorrow.isoformat())
    assert "daily budget of 1000 tokens" in body["error"]
    assert [m["content"] for m in as_user.history(ws_id)][-1] == "spent"  # nothing stored
    # the first send retried (its answer lost): answered as it was, not refused for the budget
    again = as_user.http.post(url, json={"message": "spend it"}, headers=key)
    assert again.status_code == 202 and again.json() == {"turn_id": turn_id, "status": "error"}
    (warned,) = chat_platform.wait_for(kind="webhook", target="budgets")
    assert warned.body["title"] == "Budget warning"
    assert f"{BUDGETED_USER} has used 105% of the tokens_per_day budget" in warned.body["message"]
    time.sleep(1)  # the refused send checked the budget again: no second warning
    assert len(chat_platform.wait_for(kind="webhook", target="budgets")) == 1
