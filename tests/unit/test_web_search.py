"""web_search alone: the SearxNG client against a fake SearxNG over real HTTP, the handler's
checks and result format, and the tool being offered only when a backend is configured.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from app.settings import Settings, SettingsError, ToolSettings
from app.tools import web_search
from app.tools.core import toolset
from app.tools.core.base import ToolContext
from app.tools.core.registry import build_registry
from app.tools.web.searxng import SearchError, SearxNG
from tests.fakes.searxng import FakeSearxNG, result

TURNSTONE = result(
    "Ruddy turnstone - Wikipedia",
    "https://en.wikipedia.org/wiki/Ruddy_turnstone",
    "The ruddy turnstone is a small   wading bird,\n one of two species of turnstone.",
)
AUDUBON = result("Ruddy Turnstone | Audubon", "https://www.audubon.org/field-guide/bird/ruddy-turnstone", "")


@pytest.fixture
def searx() -> Iterator[FakeSearxNG]:
    server = FakeSearxNG()
    yield server
    server.close()


def context(url: str | None) -> ToolContext:
    return ToolContext("ws", "/tmp", settings=ToolSettings(searxng_url=url))


def run(url: str | None, **args):
    ctx = context(url)
    prep = web_search.prepare(args, ctx)
    assert prep.error is None, prep.error
    return web_search.execute(prep.args, ctx)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the client --------------------------------------------------------------------------------


def test_the_client_asks_for_json_and_returns_the_results_in_order(searx):
    searx.answer([TURNSTONE, AUDUBON])
    found = SearxNG(searx.url + "/").search("ruddy turnstone")
    assert [r.url for r in found] == [TURNSTONE["url"], AUDUBON["url"]]
    assert found[0].snippet == "The ruddy turnstone is a small wading bird, one of two species of turnstone."
    assert searx.queries == [{"path": "/search", "q": "ruddy turnstone", "format": "json"}]


@pytest.mark.parametrize("category", ["news", "it", "science"])
def test_a_category_is_sent_as_searxng_categories(searx, category):
    SearxNG(searx.url).search("turnstone", category)
    assert searx.queries[-1]["categories"] == category


def test_general_sends_no_category(searx):
    SearxNG(searx.url).search("turnstone", "general")
    assert "categories" not in searx.queries[-1]


def test_entries_without_an_address_are_skipped_and_a_missing_title_shows_the_address(searx):
    searx.answer([{"title": "no link"}, {"url": "https://example.org/a", "content": 3}])
    (only,) = SearxNG(searx.url).search("x")
    assert (only.title, only.url, only.snippet) == ("https://example.org/a", "https://example.org/a", "")


# -- the handler: arguments --------------------------------------------------------------------


def test_the_call_is_normalised_with_defaults_and_asks_a_person():
    prep = web_search.prepare({"query": "  ruddy\nturnstone "}, context("http://searx.test"))
    assert prep.error is None and prep.needs_approval is True
    assert prep.args == {"query": "ruddy turnstone", "max_results": 5, "category": "general"}
    assert prep.header == "web_search ruddy turnstone"
    assert prep.preview == "Search: ruddy turnstone\nCategory: general; at most 5 result(s)"


@pytest.mark.parametrize("count", [0, 21, -3, "5", 2.5, True, None])
def test_max_results_outside_1_to_20_is_an_error_saying_the_range(count):
    prep = web_search.prepare({"query": "x", "max_results": count}, context("http://searx.test"))
    assert prep.needs_approval is False
    assert prep.error == f"Error: max_results must be a whole number from 1 to 20, not {count!r}"


@pytest.mark.parametrize("args", [{}, {"query": ""}, {"query": "   "}, {"query": 7}])
def test_a_missing_query_is_an_error(args):
    prep = web_search.prepare(args, context("http://searx.test"))
    assert prep.error == "Error: web_search needs 'query', a non-empty string"


def test_an_unknown_category_is_an_error_naming_the_known_ones():
    prep = web_search.prepare({"query": "x", "category": "images"}, context("http://searx.test"))
    assert prep.error == "Error: category must be one of general, news, it, science, not 'images'"


def test_without_a_backend_the_call_is_an_error_saying_what_to_set():
    assert web_search.prepare({"query": "x"}, context(None)).error == web_search.NO_BACKEND
    assert web_search.execute({"query": "x"}, context(None)).output == web_search.NO_BACKEND


# -- the handler: results ----------------------------------------------------------------------


def test_results_are_numbered_markdown_links_with_their_extracts(searx):
    searx.answer([TURNSTONE, AUDUBON])
    outcome = run(searx.url, query="ruddy turnstone")
    assert not outcome.is_error
    assert outcome.output == (
        "1. [Ruddy turnstone - Wikipedia](https://en.wikipedia.org/wiki/Ruddy_turnstone)\n"
        "   The ruddy turnstone is a small wading bird, one of two species of turnstone.\n"
        "2. [Ruddy Turnstone | Audubon](https://www.audubon.org/field-guide/bird/ruddy-turnstone)"
    )


def test_max_results_cuts_the_list_after_duplicates_are_dropped(searx):
    pool = [result(f"Page {n}", f"https://example.org/{n}", f"about {n}") for n in range(30)]
    searx.answer([pool[0], pool[0], *pool[1:]])
    outcome = run(searx.url, query="pages", max_results=3)
    assert [line.split("]")[0] for line in outcome.output.splitlines()[::2]] == [
        "1. [Page 0",
        "2. [Page 1",
        "3. [Page 2",
    ]
    assert len(run(searx.url, query="pages", max_results=20).output.splitlines()) == 40


def test_brackets_in_titles_and_parentheses_in_addresses_cannot_break_the_link(searx):
    searx.answer([result("[Ad] Buy (now)", "https://example.org/wiki/Bird_(genus)")])
    assert (
        run(searx.url, query="x").output
        == "1. [\\[Ad\\] Buy (now)](https://example.org/wiki/Bird_%28genus%29)"
    )


def test_a_long_extract_is_shortened(searx):
    searx.answer([result("Long", "https://example.org/long", "word " * 500)])
    snippet = run(searx.url, query="x").output.splitlines()[1].strip()
    assert len(snippet) == 400 and snippet.endswith("…")


def test_no_results_is_a_plain_message(searx):
    outcome = run(searx.url, query="zzqx turnstone")
    assert not outcome.is_error and outcome.output == "No results for 'zzqx turnstone'."


# -- the handler: a broken backend -------------------------------------------------------------


def test_a_refused_connection_is_an_error_result():
    outcome = run(f"http://127.0.0.1:{closed_port()}", query="x")
    assert outcome.is_error
    assert (
        outcome.output == "Error: web_search failed: the search backend could not be reached (ConnectError)"
    )


def test_a_server_error_is_an_error_result_with_the_status(searx):
    searx.fail(502)
    outcome = run(searx.url, query="x")
    assert (
        outcome.is_error
        and outcome.output == "Error: web_search failed: the search backend answered 502 Bad Gateway"
    )


def test_an_answer_that_is_not_json_is_an_error_result(searx):
    searx.garbage()  # what SearxNG sends when its json format is not enabled, more or less
    outcome = run(searx.url, query="x")
    assert outcome.is_error
    assert outcome.output == (
        "Error: web_search failed: the search backend's answer is not JSON (is its json format enabled?)"
    )


def test_json_without_results_is_an_error_result(searx):
    searx.body = b'{"error": "nope"}'
    outcome = run(searx.url, query="x")
    assert (
        outcome.is_error
        and outcome.output == "Error: web_search failed: the search backend's answer has no list of results"
    )


def test_a_backend_that_does_not_answer_in_time_is_an_error_result(searx):
    searx.stall(3)
    with pytest.raises(SearchError, match=r"did not answer within 0.5 s"):
        SearxNG(searx.url, timeout=0.5).search("x")


# -- offered only with a backend ---------------------------------------------------------------


def offered(settings: ToolSettings) -> list[str]:
    built = toolset.build(build_registry(settings=settings), [], "interactive")
    return [schema["function"]["name"] for schema in built.schemas("/work", None)]


def test_without_a_backend_the_model_is_not_offered_web_search():
    tools = offered(ToolSettings())
    assert "web_search" not in tools and "web_fetch" in tools
    assert build_registry(settings=ToolSettings()).tool("web_search", "interactive") is None


def test_with_a_backend_the_model_is_offered_web_search():
    assert "web_search" in offered(ToolSettings(searxng_url="http://searxng:8080"))


def test_task_agents_run_it_unprompted_and_interactive_sessions_ask():
    registry = build_registry(settings=ToolSettings(searxng_url="http://searx.test"))
    prep = web_search.prepare({"query": "x"}, context("http://searx.test"))
    assert registry.tool("web_search", "task").needs_approval(prep, "task") is False
    assert registry.tool("web_search", "interactive").needs_approval(prep, "interactive") is True


# -- configuration -----------------------------------------------------------------------------


def test_the_backend_comes_from_config_and_the_environment_overrides_it():
    config = {"tools": {"searxng_url": "http://searx.internal:8080/"}}
    assert Settings.from_mapping(config, {}).tools.searxng_url == "http://searx.internal:8080"
    env = {"TURNSTONE_SEARXNG_URL": "https://search.example"}
    assert Settings.from_mapping(config, env).tools.searxng_url == "https://search.example"
    assert Settings.from_mapping(config, {"TURNSTONE_SEARXNG_URL": ""}).tools.searxng_url is None
    assert Settings.from_mapping({}, {}).tools.searxng_url is None


@pytest.mark.parametrize("url", ["searxng:8080", "ftp://searx", "http://"])
def test_a_backend_url_that_is_not_http_is_refused(url):
    with pytest.raises(SettingsError, match="searxng_url must be an http"):
        Settings.from_mapping({"tools": {"searxng_url": url}}, {})
