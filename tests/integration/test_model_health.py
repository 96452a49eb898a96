"""Models' health through the running service (docs/providers.md#health): a probe of every
model's server marks each ok or degraded, the listing shows it, and a step whose model is
degraded goes to a fallback that is not, saying so; the next probe that finds it well puts it
back at the head of its chain."""

from __future__ import annotations

import time

import httpx
import pytest

from app.taskqueue import CONTROL_QUEUE, MODEL_HEALTH_TASK
from tests.fakes.model_server import Reply
from tests.integration.client import wait_until
from tests.integration.people import People

pytestmark = pytest.mark.integration


def check(api) -> dict[str, dict]:
    r = api.http.post("/v1/api/models/check")
    assert r.status_code == 200, r.text
    return {m["name"]: m for m in r.json()["models"]}


def test_a_probe_marks_each_server_and_the_listing_shows_it(services, api, backup_model):
    backup_model.listing_status = 503
    checked = check(api)
    assert checked["default"]["health"]["state"] == "ok" and checked["default"]["health"]["reason"] is None
    assert checked["claude"]["health"]["state"] == "ok"  # the Anthropic SDK's own listing
    assert checked["chained"]["health"] == {
        "state": "degraded",
        "reason": "the server answered 503",
        "checked_at": checked["chained"]["health"]["checked_at"],
    }
    assert checked["nowhere"]["health"]["state"] == "degraded"
    assert checked["nowhere"]["health"]["reason"].startswith("it cannot be reached")
    assert checked["keyless"]["health"]["reason"] == "no API key is configured"
    assert checked["ranker"]["health"] is None  # a reranker is not a chat model's server
    # Every user sees it; a key or an address never.
    listed = {m["name"]: m for m in api.http.get("/v1/api/models").json()["models"]}
    assert listed["chained"]["health"]["state"] == "degraded"
    assert "127.0.0.1" not in str(listed) and "sk-ant" not in str(listed)


def test_only_an_admin_asks_for_a_probe(services):
    person = People(services).user("health-user")
    user = httpx.Client(
        base_url=services.base_url, headers={"Authorization": f"Bearer {person.tokens['all']}"}
    )
    assert user.post("/v1/api/models/check").status_code == 403
    assert user.get("/v1/api/models").status_code == 200
    assert httpx.post(f"{services.base_url}/v1/api/models/check").status_code == 401


def test_a_degraded_model_hands_its_steps_to_a_healthy_fallback_until_it_is_well(
    api, model, backup_model, open_socket, workdir
):
    backup_model.listing_status = 503
    assert check(api)["chained"]["health"]["state"] == "degraded"
    ws_id = api.create_workstream(working_dir=str(workdir), model="chained")
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="from the fallback"), match="while it is down")
    turn_id = api.send(ws_id, "while it is down")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    switched = sock.wait_type("model_fallback")
    assert switched["from_model"] == "chained" and switched["to_model"] == "claude"
    assert switched["reason"] == "chained is degraded: the server answered 503"
    assert backup_model.history == []  # its time-outs were not waited out
    assert [m["model"] for m in api.history(ws_id) if m["role"] == "assistant"] == ["claude"]

    backup_model.listing_status = None  # back: the next probe puts it at the head again
    assert check(api)["chained"]["health"]["state"] == "ok"
    backup_model.enqueue(Reply(text="from the primary"))
    turn_id = api.send(ws_id, "now it is back")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert [m["model"] for m in api.history(ws_id) if m["role"] == "assistant"] == ["claude", "chained"]


def test_a_degraded_model_without_a_healthy_fallback_is_still_asked(api, backup_model, open_socket, workdir):
    # `doomed` (the backup server) falls back to `nowhere`, which nothing serves: with both
    # degraded the chain stays as configured, and doomed's server, which still answers chats,
    # gives the answer.
    backup_model.listing_status = 503
    checked = check(api)
    assert checked["doomed"]["health"]["state"] == checked["nowhere"]["health"]["state"] == "degraded"
    ws_id = api.create_workstream(working_dir=str(workdir), model="doomed")
    sock = open_socket(ws_id)
    backup_model.enqueue(Reply(text="asked anyway"))
    turn_id = api.send(ws_id, "a plain one")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert sock.of_type("model_fallback") == []
    assert [m["model"] for m in api.history(ws_id) if m["role"] == "assistant"] == ["doomed"]


def test_the_workers_probe_task_records_what_it_found(api, backup_model, task_queue):
    backup_model.listing_status = 500
    before = time.time()
    task_queue.celery.send_task(MODEL_HEALTH_TASK, queue=CONTROL_QUEUE)  # what beat sends

    def probed() -> dict | None:
        listed = {m["name"]: m for m in api.http.get("/v1/api/models").json()["models"]}
        health = listed["chained"]["health"]
        return health if health and health["checked_at"] >= before else None

    assert wait_until(probed, timeout=30)["reason"] == "the server answered 500"


@pytest.fixture(autouse=True)
def _well_again(api, backup_model):
    """The backup server lists again, and every model is probed anew: the tests after these
    find no model degraded that is not."""
    yield
    backup_model.listing_status = None
    check(api)
