"""web_fetch through the whole service: a person approves, the page is fetched from a real
loopback server, the workstream's model answers a side question, and the guard refuses.

The service under test runs with `tools.allow_private_network = true` (conftest): its
targets here are loopback servers, which are private. The cloud metadata address stays
refused with that switch on, so the refusals below go through the same service; the
default refusal of private addresses is proven in tests/unit/test_web_fetch.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.unit.test_fetcher import Site, page, redirect

pytestmark = pytest.mark.integration

ARTICLE = """<!doctype html><html><head><title>Shorebirds</title>
<script>fetch('/beacon')</script><style>h1 { color: teal }</style></head>
<body><h1>The ruddy turnstone</h1>
<p>An adult ruddy turnstone weighs about 120 grams.</p></body></html>"""
PAGE_FACT = "An adult ruddy turnstone weighs about 120 grams."
METADATA_REFUSAL = "Refused: 169.254.169.254 is a cloud metadata address; it is never fetched"


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site({"/start": redirect("/birds/turnstone"), "/birds/turnstone": page(ARTICLE)})
    yield server
    server.close()


def fetch_call(url: str) -> ToolCall:
    return ToolCall("web_fetch", {"url": url, "question": "How much does a turnstone weigh?"})


def test_a_page_is_fetched_after_approval_and_the_model_answers_from_it(api, model, open_socket, site):
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[fetch_call(site.url("/start"))]))
    model.enqueue(Reply(text="About 120 grams, for an adult."), match=PAGE_FACT)  # the side request
    model.enqueue(Reply(text="A turnstone weighs about 120 grams."))
    turn_id = api.send(ws_id, "how heavy is a turnstone?")

    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["func_name"] == "web_fetch" and item["needs_approval"] is True and item["error"] is None
    assert item["header"] == f"web_fetch {site.url('/start')}"
    assert item["preview"].splitlines() == [
        f"GET {site.url('/start')}",
        "Question: How much does a turnstone weigh?",
        "Private network: 127.0.0.1 is a loopback address; "
        "allowed because tools.allow_private_network is on.",
    ]
    assert site.hits == []  # nothing is fetched before a person says yes

    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    final_url = site.url("/birds/turnstone")
    assert not result["is_error"]
    assert result["output"] == (
        f"About 120 grams, for an adult.\n\nSource: {final_url} (redirected from {site.url('/start')})"
    )
    sock.wait_turn_end(turn_id)
    assert site.paths == ["/start", "/birds/turnstone"]

    first, side, last = (request.body for request in model.history)
    assert "web_fetch" in {tool["function"]["name"] for tool in first["tools"]}
    # The side request: the page's text and the question, no tools, nothing of the conversation.
    assert "tools" not in side
    question = side["messages"][-1]["content"]
    assert PAGE_FACT in question and "The ruddy turnstone" in question
    assert "beacon" not in question and "teal" not in question
    assert "how heavy is a turnstone?" not in str(side["messages"])
    # The model's next step gets the answer and the final URL as the call's result.
    assert last["messages"][-1] == {
        "role": "tool",
        "tool_call_id": item["call_id"],
        "content": result["output"],
    }
    # The side request is not stored in the conversation.
    assert PAGE_FACT not in str(api.history(ws_id))


def test_the_metadata_address_is_refused_before_anyone_is_asked(api, model, open_socket):
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[fetch_call("http://169.254.169.254/latest/meta-data/")]))
    model.enqueue(Reply(text="that address is off limits"))
    turn_id = api.send(ws_id, "read the instance metadata")
    result = sock.wait_type("tool_result", timeout=60)
    assert result["is_error"] and result["output"] == METADATA_REFUSAL
    sock.wait_turn_end(turn_id)
    assert not [
        item for event in sock.of_type("approve_request") for item in event["items"] if item["needs_approval"]
    ]
    assert len(model.history) == 2  # no side request: the model was never asked about a page
    assert model.history[-1].body["messages"][-1]["content"] == METADATA_REFUSAL


def test_a_redirect_to_the_metadata_address_is_refused_when_the_call_runs(api, model, open_socket, site):
    site.routes["/go"] = redirect("http://169.254.169.254/latest/meta-data/iam/")
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[fetch_call(site.url("/go"))]))
    model.enqueue(Reply(text="the page tried to send me to the metadata service"))
    turn_id = api.send(ws_id, "what does this page say?")
    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["needs_approval"] and item["error"] is None  # the first hop itself is allowed
    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    assert result["is_error"] and result["output"] == (
        f"Refused: {site.url('/go')} redirected to http://169.254.169.254/latest/meta-data/iam/, "
        "and 169.254.169.254 is a cloud metadata address; it is never fetched"
    )
    sock.wait_turn_end(turn_id)
    assert site.paths == ["/go"] and len(model.history) == 2
