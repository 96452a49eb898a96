"""web_search through the whole service: the model is offered it (the service is configured with
a fake SearxNG, conftest), a person approves, and the model's next request carries the results.
"""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.fakes.searxng import result

pytestmark = pytest.mark.integration

RESULTS = [
    result(
        "Ruddy turnstone - Wikipedia",
        "https://en.wikipedia.org/wiki/Ruddy_turnstone",
        "The ruddy turnstone is a small wading bird.",
    ),
    result("Turnstones on the shore", "https://birds.example/turnstones", "They flip stones to find food."),
    result("Third", "https://example.org/third", "not asked for"),
]
SHOWN = (
    "1. [Ruddy turnstone - Wikipedia](https://en.wikipedia.org/wiki/Ruddy_turnstone)\n"
    "   The ruddy turnstone is a small wading bird.\n"
    "2. [Turnstones on the shore](https://birds.example/turnstones)\n"
    "   They flip stones to find food."
)


def search_call(**args: object) -> ToolCall:
    return ToolCall("web_search", {"query": "ruddy turnstone", **args})


def test_an_approved_search_gives_the_model_numbered_results(api, model, open_socket, searxng):
    searxng.answer(RESULTS)
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[search_call(max_results=2, category="science")]))
    model.enqueue(Reply(text="Turnstones are small wading birds."))
    turn_id = api.send(ws_id, "what is a turnstone?")

    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["func_name"] == "web_search" and item["needs_approval"] is True and item["error"] is None
    assert item["header"] == "web_search ruddy turnstone"
    assert searxng.queries == []  # nothing is searched before a person says yes

    assert api.approve(ws_id, approved=True).status_code == 200
    result_event = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    assert not result_event["is_error"] and result_event["output"] == SHOWN
    sock.wait_turn_end(turn_id)
    assert searxng.queries == [
        {"path": "/search", "q": "ruddy turnstone", "format": "json", "categories": "science"}
    ]

    first, last = (request.body for request in model.history)
    assert "web_search" in {tool["function"]["name"] for tool in first["tools"]}
    assert last["messages"][-1] == {"role": "tool", "tool_call_id": item["call_id"], "content": SHOWN}


def test_a_failing_backend_gives_the_model_an_error_saying_what_happened(api, model, open_socket, searxng):
    searxng.fail(503)
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[search_call()]))
    model.enqueue(Reply(text="The search service is down."))
    turn_id = api.send(ws_id, "search for turnstones")
    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert api.approve(ws_id, approved=True).status_code == 200
    result_event = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    failure = "Error: web_search failed: the search backend answered 503 Service Unavailable"
    assert result_event["is_error"] and result_event["output"] == failure
    sock.wait_turn_end(turn_id)
    assert model.history[-1].body["messages"][-1]["content"] == failure


def test_max_results_out_of_range_is_refused_before_anyone_is_asked(api, model, open_socket, searxng):
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[search_call(max_results=50)]))
    model.enqueue(Reply(text="I will ask for fewer."))
    turn_id = api.send(ws_id, "find fifty pages about turnstones")
    result_event = sock.wait_type("tool_result", timeout=60)
    refusal = "Error: max_results must be a whole number from 1 to 20, not 50"
    assert result_event["is_error"] and result_event["output"] == refusal
    sock.wait_turn_end(turn_id)
    assert not [
        item for event in sock.of_type("approve_request") for item in event["items"] if item["needs_approval"]
    ]
    assert searxng.queries == []


def test_a_reranker_reorders_the_pool_before_the_model_sees_it(api, model, open_socket, searxng, reranker):
    # the service's config selects a reranker; this test brings it up (others see it down)
    searxng.answer(RESULTS)
    ws_id = api.create_workstream(auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(
        Reply(tool_calls=[ToolCall("web_search", {"query": "shore stones food", "max_results": 2})])
    )
    model.enqueue(Reply(text="They flip stones."))
    turn_id = api.send(ws_id, "how do turnstones feed?")
    done = sock.wait_type("tool_result", timeout=60)
    sock.wait_turn_end(turn_id)
    # SearxNG's second result is the best match: first after reranking, and the third came in
    assert done["output"].splitlines()[0] == "1. [Turnstones on the shore](https://birds.example/turnstones)"
    (request,) = reranker.requests
    assert request["authorization"] == "Bearer rk-fake-rerank-key"
    assert request["body"]["model"] == "fake-ranker" and request["body"]["query"] == "shore stones food"
    assert len(request["body"]["documents"]) == 3
