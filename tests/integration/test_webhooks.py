"""Webhooks through the running service (docs/webhooks.md): a receiver on loopback verifies each
delivery's Standard Webhooks signature (with the specification's library and by hand), sees
retries after 500s and after a worker killed mid-retry, and a run's end recorded once; secrets
are shown once and rotate; another user's endpoint is not found; hostile bodies are 4xx."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import wait_until
from tests.integration.people import People
from tests.integration.test_metrics import scrape, value

pytestmark = pytest.mark.integration


class Receiver:
    """An HTTP server on loopback that answers each POST with the next status of `answers`
    (then 204) and keeps what it received."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.answers: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                code = receiver.answers.pop(0) if receiver.answers else 204
                self.send_response(code)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def by_hand(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The specification's signature, computed without its library."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return f"v1,{expected}" in headers["webhook-signature"].split(" ")


def register(api, url: str, **body: Any) -> dict[str, Any]:
    r = api.http.post("/v1/api/webhooks", json={"url": url, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def run_to_end(api, prompt: str) -> dict[str, Any]:
    r = api.http.post("/v1/api/runs", json={"prompt": prompt})
    assert r.status_code == 202, r.text
    run = api.http.get(f"/v1/api/runs/{r.json()['run_id']}", params={"wait": 30}, timeout=40).json()
    assert run["status"] == "succeeded", run
    return dict(run)


def test_a_runs_end_is_signed_and_retried_after_500s(api, model, receiver, services):
    people = People(services)
    mine = people.user("hooks").api(services)
    endpoint = register(mine, receiver.url, description="ci")
    secret = endpoint["secret"]
    assert secret.startswith("whsec_") and endpoint["events"] == [
        "run.succeeded",
        "run.failed",
        "run.cancelled",
        "approval.requested",
        "run.requires_action",
    ]
    listed = mine.http.get("/v1/api/webhooks").json()["endpoints"]
    assert [e["endpoint_id"] for e in listed] == [endpoint["endpoint_id"]]
    assert "secret" not in listed[0] and secret not in json.dumps(listed)
    assert secret not in mine.http.get(f"/v1/api/webhooks/{endpoint['endpoint_id']}").text

    before = scrape(services.base_url)
    receiver.answers = [500, 503]
    model.enqueue(Reply(text="done it"))
    run = run_to_end(mine, "do it")
    wait_until(lambda: len(receiver.received) >= 3, timeout=30, what="three attempts")
    time.sleep(1.5)
    assert len(receiver.received) == 3  # delivered on the third, then no more
    ids = {h["webhook-id"] for h, _ in receiver.received}
    assert len(ids) == 1  # one message, attempted three times
    for headers, body in receiver.received:
        assert Webhook(secret).verify(body, headers)["type"] == "run.succeeded"
        assert by_hand(secret, headers, body)
    event = json.loads(receiver.received[-1][1])
    assert event["data"]["run_id"] == run["run_id"] and event["data"]["answer"] == "done it"
    assert event["data"]["status"] == "succeeded"

    after = scrape(services.base_url)
    assert (
        value(after, "turnstone_webhook_attempts_total", outcome="retry")
        - value(before, "turnstone_webhook_attempts_total", outcome="retry")
        >= 2
    )
    assert value(after, "turnstone_webhook_attempts_total", outcome="delivered") > value(
        before, "turnstone_webhook_attempts_total", outcome="delivered"
    )
    assert value(after, "turnstone_runs_ended_total", status="succeeded") > value(
        before, "turnstone_runs_ended_total", status="succeeded"
    )
    log = mine.http.get(f"/v1/api/webhooks/{endpoint['endpoint_id']}/deliveries").json()["deliveries"]
    assert [(d["status"], d["attempts"], d["last_status"]) for d in log] == [("delivered", 3, 204)]
    assert log[0]["delivery_id"] == ids.pop()

    # Redelivered by hand, with a rotated secret: the old one no longer verifies it.
    r = mine.http.post(f"/v1/api/webhooks/{endpoint['endpoint_id']}/rotate")
    assert r.status_code == 200, r.text
    rotated = r.json()["secret"]
    assert rotated != secret
    r = mine.http.post(
        f"/v1/api/webhooks/{endpoint['endpoint_id']}/deliveries/{log[0]['delivery_id']}/redeliver"
    )
    assert r.status_code == 202, r.text
    wait_until(lambda: len(receiver.received) == 4, timeout=30, what="the redelivery")
    headers, body = receiver.received[-1]
    assert by_hand(rotated, headers, body) and not by_hand(secret, headers, body)

    # Another user sees none of it.
    other = people.user("nosy").api(services)
    for path in ("", "/deliveries", f"/deliveries/{log[0]['delivery_id']}/redeliver"):
        url = f"/v1/api/webhooks/{endpoint['endpoint_id']}{path}"
        r = other.http.post(url) if path.endswith("redeliver") else other.http.get(url)
        assert r.status_code == 404, (path, r.text)
    assert other.http.get("/v1/api/webhooks").json()["endpoints"] == []
    assert other.http.delete(f"/v1/api/webhooks/{endpoint['endpoint_id']}").status_code == 404
    assert mine.http.delete(f"/v1/api/webhooks/{endpoint['endpoint_id']}").status_code == 200


def test_a_retry_survives_a_worker_killed_while_it_waits(api, model, receiver, services):
    people = People(services)
    mine = people.user("durable").api(services)
    register(mine, receiver.url, events=["run.succeeded"])
    receiver.answers = [500]
    model.enqueue(Reply(text="x"))
    run_to_end(mine, "go")
    wait_until(lambda: len(receiver.received) >= 1, timeout=30, what="the first attempt")
    services.kill("worker")  # the retry is due in a second: only the database knows of it
    time.sleep(2)
    assert len(receiver.received) == 1
    services.start_worker()
    wait_until(lambda: len(receiver.received) >= 2, timeout=60, what="the retry after the restart")
    assert receiver.received[0][0]["webhook-id"] == receiver.received[1][0]["webhook-id"]


def test_private_targets_and_hostile_bodies_are_refused(api, services):
    hostile: list[tuple[Any, int]] = [
        ({}, 400),
        ({"url": 5}, 400),
        ({"url": "ftp://example.com/x"}, 400),
        ({"url": "http://169.254.169.254/latest"}, 422),  # well-formed; the SSRF guard refuses it
        ({"url": "http://metadata.google.internal/"}, 422),
        ({"url": "http://user:pw@example.com/"}, 400),
        ({"url": "not a url"}, 400),
        ({"url": "http://x\x00y/"}, 400),
        ({"url": "http://\ud800/"}, 400),
        ({"url": "http://e.com/" + "a" * 9000}, 400),
        ({"url": "https://example.com/h", "events": ["run.exploded"]}, 400),
        ({"url": "https://example.com/h", "events": "run.failed"}, 400),
        ({"url": "https://example.com/h", "events": [{"a": 1}]}, 400),
        ({"url": "https://example.com/h", "description": "d" * 500}, 400),
        ({"url": "https://example.com/h", "description": "\x00"}, 400),
    ]
    for body, expected in hostile:
        r = api.http.post(
            "/v1/api/webhooks", content=json.dumps(body), headers={"Content-Type": "application/json"}
        )
        assert r.status_code == expected, (str(body)[:80], r.text[:200])
        assert "error" in r.json()
    for path in ("nope", "%00", "a" * 40):
        assert api.http.get(f"/v1/api/webhooks/{path}").status_code == 404
    mine = register(api, "https://example.com/h")
    for delivery in ("nope", "%00", "m" * 60, "%F0%9F%98%80"):
        r = api.http.post(f"/v1/api/webhooks/{mine['endpoint_id']}/deliveries/{delivery}/redeliver")
        assert r.status_code == 404, (delivery, r.text)
    for limit in ("0", "201", "x", "1e2"):
        r = api.http.get(f"/v1/api/webhooks/{mine['endpoint_id']}/deliveries", params={"limit": limit})
        assert r.status_code == 400, (limit, r.text)
    api.http.delete(f"/v1/api/webhooks/{mine['endpoint_id']}")


def test_a_run_waiting_for_a_person_is_announced_once(api, model, receiver, services):
    mine = People(services).user("asks").api(services)
    secret = register(mine, receiver.url)["secret"]
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hi"}, id="a1")]))
    model.enqueue(Reply(text="ran"))
    r = mine.http.post("/v1/api/runs", json={"prompt": "ask me"})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    wait_until(lambda: len(receiver.received) >= 1, timeout=30, what="approval.requested")
    time.sleep(3)  # three more sweeps: it is not announced again
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    event = Webhook(secret).verify(body, headers)
    assert event["type"] == "approval.requested" and event["data"]["run_id"] == run_id
    assert [p["call_id"] for p in event["data"]["pending_approvals"]] == ["a1"]
    link = event["data"]["decide_path"]
    anyone = httpx.Client(base_url=services.base_url, timeout=30)  # no token: the link is the permission
    for altered in (
        link.replace("sig=", "sig=0"),
        link.replace("exp=", "exp=9"),
        link.replace("step=", "step=1"),
        link.replace(run_id, "0" * 32),
    ):
        r = anyone.post(altered, json={"approved": True})
        assert r.status_code == 404, (altered, r.text)
    unsigned = anyone.post(link.split("&sig=")[0], json={"approved": True})  # not a link at all
    assert unsigned.status_code == 400 and unsigned.json()["field"] == "sig", unsigned.text
    for body in ({}, {"approved": "yes"}, {"approved": True, "feedback": "\x00"}):
        assert anyone.post(link, json=body).status_code == 400
    r = anyone.post(link, json={"approved": True})
    assert r.status_code == 200 and r.json()["decided"] == ["a1"], r.text
    wait_until(lambda: len(receiver.received) >= 2, timeout=30, what="run.succeeded")
    assert anyone.post(link, json={"approved": False}).status_code == 409  # that step waits no more
    calls = mine.http.get(f"/v1/api/runs/{run_id}").json()["tool_calls"]
    assert [(c["call_id"], c["status"]) for c in calls] == [("a1", "done")]
    assert json.loads(receiver.received[1][1])["type"] == "run.succeeded"


def events_of(receiver: Receiver, secret: str) -> list[dict[str, Any]]:
    """What the receiver got, each verified with the endpoint's secret."""
    return [Webhook(secret).verify(body, headers) for headers, body in list(receiver.received)]


def test_turn_completed_and_a_runs_and_a_schedules_own_endpoint(api, model, services):
    people = People(services)
    mine = people.user("hooks-turns").api(services)
    turns, own = Receiver(), Receiver()
    try:
        listening = register(mine, turns.url, events=["turn.completed"])
        narrow = register(mine, own.url, events=["approval.requested"])  # no run.* of its own accord

        # An interactive turn's end reaches the endpoint that names turn.completed.
        ws_id = mine.create_workstream()
        model.enqueue(Reply(text="chatted"))
        mine.send(ws_id, "hello")
        mine.wait_idle(ws_id)
        wait_until(
            lambda: any(e["data"]["ws_id"] == ws_id for e in events_of(turns, listening["secret"])),
            timeout=30,
            what="turn.completed of the interactive turn",
        )
        [chat] = [e for e in events_of(turns, listening["secret"]) if e["data"]["ws_id"] == ws_id]
        assert chat["type"] == "turn.completed" and chat["data"]["status"] == "done"
        assert chat["data"]["answer"] == "chatted" and chat["data"]["run_id"] is None

        # A run naming an endpoint sends it every event of its own, whatever that endpoint's filter.
        model.enqueue(Reply(text="to my own hook"))
        r = mine.http.post("/v1/api/runs", json={"prompt": "p", "webhook": narrow["endpoint_id"]})
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        run = mine.http.get(f"/v1/api/runs/{run_id}", params={"wait": 30}, timeout=40).json()
        assert run["status"] == "succeeded" and run["webhook"] == narrow["endpoint_id"], run
        wait_until(lambda: len(own.received) >= 2, timeout=30, what="the run's two events")
        got = {e["type"]: e["data"] for e in events_of(own, narrow["secret"])}
        assert got["run.succeeded"]["run_id"] == run_id and got["run.succeeded"]["answer"] == "to my own hook"
        assert got["turn.completed"]["run_id"] == run_id and got["turn.completed"]["status"] == "done"
        wait_until(
            lambda: any(e["data"]["run_id"] == run_id for e in events_of(turns, listening["secret"])),
            timeout=30,
            what="the run's turn.completed at the listening endpoint",
        )
        assert {e["type"] for e in events_of(turns, listening["secret"])} == {"turn.completed"}

        # A run naming none: the narrow endpoint hears nothing of it.
        model.enqueue(Reply(text="not for it"))
        run_to_end(mine, "q")
        time.sleep(2.5)  # two sweeps
        assert len(own.received) == 2

        # A schedule naming an endpoint: its runs' events go there.
        r = mine.http.post(
            "/v1/api/schedules", json={"every": 2, "prompt": "tick", "webhook": narrow["endpoint_id"]}
        )
        assert r.status_code == 201 and r.json()["webhook"] == narrow["endpoint_id"], r.text
        sid = r.json()["schedule_id"]
        try:
            wait_until(
                lambda: any(
                    e["type"] == "run.succeeded" and e["data"]["metadata"].get("schedule_id") == sid
                    for e in events_of(own, narrow["secret"])
                ),
                timeout=40,
                what="a scheduled run's end at the schedule's endpoint",
            )
        finally:
            mine.http.delete(f"/v1/api/schedules/{sid}")

        # Another user's endpoint, or none, is not theirs to name; hostile values are 4xx.
        other = people.user("hooks-turns-other").api(services)
        for body in (
            {"prompt": "x", "webhook": narrow["endpoint_id"]},
            {"prompt": "x", "webhook": "nope"},
        ):
            assert other.http.post("/v1/api/runs", json=body).status_code == 404
        r = other.http.post(
            "/v1/api/schedules", json={"every": 60, "prompt": "x", "webhook": narrow["endpoint_id"]}
        )
        assert r.status_code == 404, r.text
        for bad in ("\x00", 5, "a" * 300, ["x"]):
            r = mine.http.post("/v1/api/runs", json={"prompt": "x", "webhook": bad})
            assert r.status_code == 400, (bad, r.text)
        r = mine.http.post("/v1/api/webhooks", json={"url": turns.url, "events": ["turn.started"]})
        assert r.status_code == 400, r.text
    finally:
        turns.close()
        own.close()


class SlowReceiver(Receiver):
    """A receiver that takes `seconds` over each POST, counting how many it holds at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.holding, self.most = seconds, 0, 0
        self.lock = threading.Lock()
        super().__init__()
        plain = self.server.RequestHandlerClass.do_POST
        slow = self

        def do_post(handler: BaseHTTPRequestHandler) -> None:
            with slow.lock:
                slow.holding += 1
                slow.most = max(slow.most, slow.holding)
            try:
                time.sleep(slow.seconds)
                plain(handler)
            finally:
                with slow.lock:
                    slow.holding -= 1

        self.server.RequestHandlerClass.do_POST = do_post  # type: ignore[method-assign]


def test_slow_receivers_hold_a_few_workers_and_each_delivery_is_sent_once(api, model, services):
    # 12 turns end at once; their turn.completed deliveries go to a receiver that takes 3 s each.
    # A worker (8 threads here) attempts at most [webhooks] concurrency (4) of them at once, so a
    # turn started meanwhile runs on the threads left; each delivery is POSTed once.
    mine = People(services).user("hooks-slow").api(services)
    slow = SlowReceiver(3.0)
    try:
        endpoint = register(mine, slow.url, events=["turn.completed"])
        workstreams = [mine.create_workstream() for _ in range(12)]
        for ws_id in workstreams:
            model.enqueue(Reply(text="done quickly"), match=f"slow {ws_id}")
            mine.send(ws_id, f"slow {ws_id}")
        for ws_id in workstreams:
            mine.wait_idle(ws_id)
        wait_until(lambda: slow.holding >= 3, timeout=30, what="the deliveries under way")
        # While the receiver holds them, another turn (a model step and a tool batch) still runs.
        ws_id = mine.create_workstream(auto_approve=True)
        model.enqueue(
            Reply(tool_calls=[ToolCall("bash", {"command": "echo meanwhile"}, id="m1")]), match="meanwhile"
        )
        model.enqueue(Reply(text="ran meanwhile"), match="meanwhile")
        started = time.monotonic()
        mine.send(ws_id, "meanwhile")
        assert mine.wait_idle(ws_id, timeout=30)["state"] == "idle"
        assert time.monotonic() - started < 9, "a turn waited behind the slow deliveries"
        wait_until(lambda: len(slow.received) >= 13, timeout=60, what="every delivery")
        time.sleep(2.5)  # two more sweeps: nothing is sent again
        ids = [headers["webhook-id"] for headers, _ in slow.received]
        assert len(ids) == len(set(ids)) == 13  # the 12, and the turn's that ran meanwhile
        assert slow.most <= 4, f"{slow.most} attempts at once"
        listed = mine.http.get(f"/v1/api/webhooks/{endpoint['endpoint_id']}/deliveries").json()["deliveries"]
        assert {d["status"] for d in listed} == {"delivered"} and {d["attempts"] for d in listed} == {1}
    finally:
        slow.close()
