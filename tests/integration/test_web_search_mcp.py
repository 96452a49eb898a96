"""web_search with `[tools] web_search_backend = "mcp:searcher:search"`, through the running
service (SQLite and PostgreSQL): the query goes to our fake MCP server's `search` tool in the
worker, its results reach the model as numbered links; a server that is absent or broken gives
the model a clear error item, never a crash of the turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.fakes.reranker import FakeReranker
from tests.integration.client import Api, EventSocket, wait_until
from tests.integration.conftest import BACKENDS
from tests.integration.mcp_peers import FakeMCP
from tests.integration.services import Services, postgres_available

pytestmark = pytest.mark.integration
BACKEND = "MCP tool 'search' of server 'searcher'"


@pytest.fixture(scope="module", params=BACKENDS)
def services(  # by this name, a failure shows the service logs (conftest's report hook)
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    model_server: FakeModelServer,
    reranker_server: FakeReranker,
) -> Iterator[Services]:
    if request.param == "postgresql" and not postgres_available():
        pytest.skip("PostgreSQL is not reachable")
    tmp = tmp_path_factory.mktemp(f"search-mcp-{request.param}")
    services = Services(request.param, tmp, model_server.openai_base_url)
    config = tmp / "config.toml"
    # No SearxNG: the backend is an MCP tool, and the server is added (or not) by each test.
    config.write_text(
        '[tools]\nweb_search_backend = "mcp:searcher:search"\n'
        # the shared fake reranker: down unless a test brings it up (`reranker`)
        f'[models.ranker]\nprovider = "rerank"\nmodel = "fake-ranker"\nbase_url = "{reranker_server.url}"\n'
        '[models.ranker.capabilities]\nsupports_rerank = true\n[roles]\nreranker = "ranker"\n'
    )
    services.env.update(TURNSTONE_CONFIG=str(config), TURNSTONE_MCP_HEALTH_SECONDS="1")
    try:
        services.start()
        yield services
    finally:
        services.stop()


def searcher_state(api: Api) -> str | None:
    found = [s for s in api.http.get("/v1/api/mcp").json()["servers"] if s["name"] == "searcher"]
    return found[0].get("state") if found else None


def put_searcher(api: Api, definition: dict[str, Any], state: str) -> None:
    """Add or replace the `searcher` server, and wait until the worker reports `state` for it.
    Only a change of state is waited on: a server removed and added again would show the
    worker's last report ("connected") until the worker has caught up."""
    if searcher_state(api) is None:
        r = api.http.post("/v1/api/mcp/servers", json={"name": "searcher", **definition})
        assert r.status_code == 201, r.text
    else:
        r = api.http.put("/v1/api/mcp/servers/searcher", json=definition)
        assert r.status_code == 200, r.text
    wait_until(lambda: searcher_state(api) == state, what=f"searcher {state}")


@pytest.fixture
def searcher(api: Api, services: Services) -> FakeMCP:
    """Our fake MCP server as `searcher` (added through the admin API), connected in the worker."""
    fake = FakeMCP(services.tmp / "searcher")
    if searcher_state(api) != "connected":
        put_searcher(api, fake.stdio(), "connected")
    return fake


def search(api: Api, model: FakeModelServer, open_socket: Callable[[str], EventSocket], query: str) -> dict:
    """One approved web_search call; its tool_result event, once the turn has ended."""
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("web_search", {"query": query, "max_results": 2}, id="s1")]))
    model.enqueue(Reply(text="done"))
    turn_id = api.send(ws_id, f"search for {query}")
    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["func_name"] == "web_search" and item["error"] is None
    assert "Backend: MCP server 'searcher', tool 'search'" in item["preview"]
    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id="s1", timeout=60)
    assert sock.wait_turn_end(turn_id)["state"] == "idle"  # the turn goes on either way
    assert model.history[-1].body["messages"][-1]["content"] == result["output"]
    return result


def test_no_such_server_gives_the_model_a_clear_error(api, model, open_socket):
    assert searcher_state(api) is None  # the module's first test: nothing added yet
    result = search(api, model, open_socket, "anything")
    assert result["is_error"]
    assert result["output"] == (
        f"Error: web_search failed: the search backend, {BACKEND}, is unavailable: "
        "MCP server 'searcher' is not configured in this worker"
    )


def test_the_query_goes_to_the_mcp_tool_and_its_results_come_back_as_links(api, model, open_socket, searcher):
    result = search(api, model, open_socket, "ruddy turnstone shore")
    assert not result["is_error"]
    assert result["output"] == (
        "1. [Unrelated portal](https://portal.example/)\n   Nothing here.\n"
        "2. [Ruddy guide](https://ruddy.example/guide)\n   All about ruddy."
    )  # the tool's order (the reranker is down), cut to max_results
    assert searcher.calls()[-1] == "search ruddy turnstone shore"
    offered = [t["function"]["name"] for t in model.history[0].body["tools"]]
    assert "web_search" in offered  # offered with no SearxNG: the MCP backend is one


def test_a_reranker_reorders_the_mcp_tools_results(api, model, open_socket, searcher, reranker):
    result = search(api, model, open_socket, "ruddy turnstone shore")
    assert result["output"] == (
        "1. [Ruddy guide](https://ruddy.example/guide)\n   All about ruddy.\n"
        "2. [Turnstone guide](https://turnstone.example/guide)\n   All about turnstone."
    )  # the portal, first from the tool, matched nothing
    (request,) = reranker.requests
    assert request["body"]["query"] == "ruddy turnstone shore" and len(request["body"]["documents"]) == 4


def test_an_answer_that_is_not_a_result_list_is_passed_on_as_text(api, model, open_socket, searcher):
    result = search(api, model, open_socket, "plain facts")
    assert not result["is_error"], result["output"]
    assert result["output"] == "Plain answer about 'plain facts': see https://plain.example/answer"


def test_a_server_that_cannot_start_gives_the_model_a_clear_error(api, model, open_socket):
    put_searcher(api, {"command": "/nonexistent/search"}, "error")
    result = search(api, model, open_socket, "anything")
    assert result["is_error"]
    assert result["output"].startswith(
        f"Error: web_search failed: the search backend, {BACKEND}, is unavailable:"
    )
