"""GET /metrics against the running service: what a turn with a tool call counts, summed over the
web and worker processes; the stored-state gauges; who may scrape; hostile query strings."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import Api, EventSocket
from tests.integration.conftest import CLAUDE_PRICE
from tests.integration.people import People
from tests.integration.services import API_TOKEN, Services, free_port

METRICS_TOKEN = "metrics-" + uuid.uuid4().hex
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def node(services: Services) -> Iterator[str]:
    """A second web node with two gunicorn workers and a metrics token: a scrape may land on
    either worker, and both must answer with the sums of every process's counts."""
    key = f"metrics-web-{services.db.backend}"
    url = services.start_web(
        name=key, port=free_port(), workers=2, env={"TURNSTONE_METRICS_TOKEN": METRICS_TOKEN}
    )
    yield url
    proc = services.processes.pop(key)
    proc.terminate()
    proc.wait(timeout=20)


def scrape(url: str, token: str = API_TOKEN) -> Samples:
    r = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.1)


def test_a_turn_with_a_tool_call_is_counted_across_processes(services, node, model, open_socket, workdir):
    api = Api(node, API_TOKEN)
    before = scrape(node)
    ws_id = api.create_workstream(name="metrics", working_dir=str(workdir))
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo counted"})]))
    model.enqueue(Reply(tool_calls=[ToolCall("no_such_tool", {})]))
    model.enqueue(Reply(text="all done"))
    first = api.send(ws_id, "run it")
    sock.wait_type("approve_request", turn_id=first)
    second = api.send(ws_id, "and then this")  # queued behind the parked turn

    parked = scrape(node)
    assert value(parked, "turnstone_parked_approvals") == value(before, "turnstone_parked_approvals") + 1
    assert value(parked, "turnstone_queued_messages") == value(before, "turnstone_queued_messages") + 1
    assert (
        value(parked, "turnstone_turns_started_total") == value(before, "turnstone_turns_started_total") + 1
    )

    assert api.approve(ws_id, approved=True).status_code == 200
    sock.wait_turn_end(first)
    sock.wait_turn_end(second)

    def delta(name: str, **labels: str) -> float:
        return value(scrape(node), name, **labels) - value(before, name, **labels)

    # Counted in the worker process, read through either gunicorn worker of this node.
    for _ in range(4):
        assert delta("turnstone_turns_started_total") == 2
        assert delta("turnstone_turns_finished_total", outcome="done") == 2
        assert delta("turnstone_tool_calls_total", tool="bash", outcome="ok") == 1
        assert delta("turnstone_tool_calls_total", tool="unknown", outcome="refused") == 1
        # three steps of the first turn (bash, the made-up tool, the answer), one of the second
        assert delta("turnstone_model_step_seconds_count") == 4
        assert delta("turnstone_tool_batch_seconds_count") == 2
    after = scrape(node)
    assert value(after, "turnstone_parked_approvals") == value(before, "turnstone_parked_approvals")
    assert value(after, "turnstone_model_step_seconds_sum") > value(
        before, "turnstone_model_step_seconds_sum"
    )
    # A model-made name never becomes a label.
    assert not [k for k in after if dict(k[1]).get("tool") == "no_such_tool"]


def test_stored_state_gauges_and_open_websockets(services, node):
    api = Api(node, API_TOKEN)
    samples = scrape(node)
    for queue in ("model_steps", "tool_batches", "control"):
        assert ("turnstone_queue_depth", (("queue", queue),)) in samples
    assert value(samples, "turnstone_live_workers") >= 1
    assert ("turnstone_mcp_servers", (("state", "connected"),)) in samples
    assert value(samples, "turnstone_scrape_errors", part="database") == 0
    assert value(samples, "turnstone_scrape_errors", part="redis") == 0

    ws_id = api.create_workstream(name="sockets")
    base = value(scrape(node), "turnstone_open_websockets")
    sockets = [EventSocket(node, API_TOKEN, ws_id) for _ in range(3)]
    try:
        # Opened on either gunicorn worker; every scrape sums both.
        wait_until(
            lambda: value(scrape(node), "turnstone_open_websockets") == base + 3, "three sockets counted"
        )
        for _ in range(4):
            assert value(scrape(node), "turnstone_open_websockets") == base + 3
    finally:
        for sock in sockets:
            sock.close()
    wait_until(lambda: value(scrape(node), "turnstone_open_websockets") == base, "closed sockets uncounted")


def test_only_an_admin_or_the_metrics_token_may_scrape(services, node):
    people = People(services)
    user = people.user("scraper")
    admin = people.user("boss", admin=True)
    assert scrape(node, METRICS_TOKEN)  # the metrics token
    assert scrape(node, admin.tokens["all"])
    r = httpx.get(node + "/metrics", timeout=30)
    assert r.status_code == 401 and "error" in r.json() and r.headers["www-authenticate"] == "Bearer"
    r = httpx.get(node + "/metrics", headers={"Authorization": f"Bearer {user.tokens['all']}"}, timeout=30)
    assert r.status_code == 403 and r.json()["scope"] == "admin"
    r = httpx.get(node + "/metrics", headers={"Authorization": "Bearer wrong"}, timeout=30)
    assert r.status_code == 401 and "error" in r.json()
    # The metrics token opens /metrics and nothing else.
    r = httpx.get(
        node + "/v1/api/workstreams", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
    )
    assert r.status_code == 401
    # Its value appears nowhere in the answer.
    text = httpx.get(node + "/metrics", params={"token": METRICS_TOKEN}, timeout=30).text
    assert METRICS_TOKEN not in text and "turnstone_turns_started_total" in text


@pytest.mark.parametrize(
    "query",
    [
        "token=%00",
        "token=%ED%A0%80",  # a lone surrogate, UTF-8 encoded
        "name[]=x&name[]=y&format=%7B%7D",
        "a=" + "%5B" * 5000,
        "token=" + "x" * 20000,
        "\udcff=1".encode("utf-8", "surrogatepass").decode("latin-1"),
    ],
)
def test_hostile_query_strings_are_harmless(services, node, query):
    for headers in ({}, {"Authorization": f"Bearer {METRICS_TOKEN}"}):
        r = httpx.get(f"{node}/metrics?{query}", headers=headers, timeout=30)
        assert r.status_code < 500, r.text
        if headers:  # a parameter /metrics does not take is a 400 naming it, as on every route
            assert r.status_code in (200, 400, 414), r.text
        if r.status_code != 200:
            assert "error" in r.json()


def test_tokens_and_cost_are_counted_by_model_and_owner(services, node, model, open_socket, workdir):
    api = Api(node, API_TOKEN)
    before = scrape(node)
    ws_id = api.create_workstream(name="priced", working_dir=str(workdir), model="claude")
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="counted", input_tokens=3000, output_tokens=500))
    sock.wait_turn_end(api.send(ws_id, "what does this cost"))

    def delta(name: str, **labels: str) -> float:
        return value(scrape(node), name, **labels) - value(before, name, **labels)

    owner = {"model": "claude", "user": "operator"}  # the operator's token made it
    wait_until(lambda: delta("turnstone_model_tokens_total", kind="input", **owner) == 3000, "input counted")
    assert delta("turnstone_model_tokens_total", kind="output", **owner) == 500
    dollars = (3000 * CLAUDE_PRICE["input"] + 500 * CLAUDE_PRICE["output"]) / 1_000_000
    assert abs(delta("turnstone_model_cost_dollars_total", **owner) - dollars) < 1e-9
