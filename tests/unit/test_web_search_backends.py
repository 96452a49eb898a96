"""web_search's backend settings (`web_search_backend`, the native search capabilities) checked
at start, and how an MCP search tool's answer is read; the service tests run both for real."""

from __future__ import annotations

import json

import pytest

from app.settings import Settings, SettingsError, ToolSettings, web_search_mcp_target
from app.tools import web_search
from app.tools.core.base import ToolContext
from app.tools.core.registry import build_registry
from app.tools.web.mcp_backend import parsed
from app.tools.web.searxng import Result


def backend(value: object) -> str:
    return Settings.from_mapping({"tools": {"web_search_backend": value}}, {}).tools.web_search_backend


def test_the_default_backend_is_searxng():
    assert Settings.from_mapping({}, {}).tools.web_search_backend == "searxng"
    assert backend("searxng") == "searxng"


def test_an_mcp_backend_names_its_server_and_tool():
    assert backend("mcp:search:brave_web_search") == "mcp:search:brave_web_search"
    assert web_search_mcp_target("mcp:search:brave_web_search") == ("search", "brave_web_search")
    assert web_search_mcp_target("mcp:s:ns:tool") == ("s", "ns:tool")  # the tool takes the rest
    assert web_search_mcp_target("searxng") is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "mcp",
        "mcp:",
        "mcp:server",
        "mcp:server:",
        "mcp::tool",
        "mcp: s:t",
        "mcp:s:t ",
        "http://x",
        "MCP:s:t",
        "searx",
        3,
        None,
        True,
        ["mcp:s:t"],
        {"mcp": "s"},
        "mcp:s\x00:t"[:5],
    ],
)
def test_a_malformed_backend_is_a_clear_start_up_error(value):
    with pytest.raises(
        SettingsError, match=r"\[tools\] web_search_backend must be 'searxng' or 'mcp:SERVER:TOOL'"
    ):
        backend(value)


def test_an_mcp_backend_offers_web_search_without_searxng():
    settings = ToolSettings(web_search_backend="mcp:s:t")
    assert web_search.is_available(settings)
    assert not web_search.is_available(ToolSettings())
    assert "web_search" in build_registry(settings=settings).offered_names("interactive")
    assert "web_search" not in build_registry(settings=ToolSettings()).offered_names("interactive")


def test_the_approval_card_names_the_mcp_backend():
    ctx = ToolContext(ws_id="w", working_dir="/w", settings=ToolSettings(web_search_backend="mcp:s:t"))
    prep = web_search.prepare({"query": "q"}, ctx)
    assert prep.error is None and prep.preview.endswith("Backend: MCP server 's', tool 't'")


def test_without_a_worker_mcp_manager_the_search_is_an_error_item():
    ctx = ToolContext(ws_id="w", working_dir="/w", settings=ToolSettings(web_search_backend="mcp:s:t"))
    outcome = web_search.execute({"query": "q"}, ctx)
    assert outcome.is_error and outcome.output.startswith(
        "Error: web_search failed: the search backend, MCP tool"
    )


def capabilities(**caps: object) -> dict:
    entry = {"provider": "anthropic", "model": "claude-x", "api_key_env": "NONE", "capabilities": caps}
    return {"models": {"c": entry}}


def test_native_search_capabilities_are_checked_at_start():
    model = Settings.from_mapping(capabilities(supports_web_search=True, web_search_max_uses=7), {}).models[
        "c"
    ]
    assert model.capabilities["web_search_max_uses"] == 7
    for bad in (
        {"supports_web_search": "yes"},
        {"web_search_max_uses": 0},
        {"web_search_max_uses": 51},
        {"web_search_max_uses": True},
        {"web_search_max_uses": 2.5},
        {"web_search_max_uses": "3"},
    ):
        with pytest.raises(SettingsError, match=r"\[models\.c\.capabilities\]"):
            Settings.from_mapping(capabilities(**bad), {})


RESULTS = [
    {"title": "A  page", "url": " https://a.example/ ", "snippet": "one\ntwo"},
    {"link": "https://b/", "description": "d"},
]


@pytest.mark.parametrize("text", [json.dumps(RESULTS), json.dumps({"results": RESULTS})])
def test_a_json_list_of_results_is_read_as_results(text):
    assert parsed(text) == [
        Result("A page", "https://a.example/", "one two"),
        Result("https://b/", "https://b/", "d"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "1. some page https://a.example",
        "[]",
        "{}",
        '{"results": "none"}',
        '[{"title": "no address"}]',
        json.dumps([*RESULTS, "stray"]),
        '"just a string"',
        "[" * 10_000,
        "\ud800 lone surrogate",
        "",
    ],
)
def test_anything_else_is_passed_on_as_the_tools_text(text):
    assert parsed(text) == text
