"""Tool search: the plan (when it is on, which tier), the partition, the tool_search tool,
the settings and the per-workstream override with hostile values."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import ModelSettings, Settings, SettingsError, ToolSettings
from app.storage.database import Database
from app.storage.models import Workstream
from app.tools import tool_search as ts
from app.tools.core import tool_search_plan, toolset
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from app.tools.core.sources import ToolSourceError, load_sources
from app.tools.core.tool import TASK, Tool, ToolDefinition
from app.tools.core.tool_search_plan import SearchOverrideError, SearchPlan, check_override
from app.tools.core.toolset import Catalog

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}
DESCRIPTIONS = {
    "github_list_issues": "List the issues of a GitHub repository.",
    "github_create_issue": "Open a new issue in a GitHub repository.",
    "slack_post_message": "Post a message to a Slack channel.",
    "weather_forecast": "The weather forecast for a city.\nSecond line, not shown.",
    "s3_put_object": "Upload a file to an S3 bucket.",
}


class Echo:
    def prepare(self, args, ctx):  # type: ignore[no-untyped-def]
        return Preparation(args, header="echo", needs_approval=True)

    def execute(self, args, ctx):  # type: ignore[no-untyped-def]
        return ToolOutcome(f"ran {args}")


class Source:
    name = "mcp"

    def __init__(self, descriptions: dict[str, str]) -> None:
        self.tools = tuple(
            Tool(ToolDefinition(n, d, OBJECT), Echo(), "mcp", "v1") for n, d in descriptions.items()
        )

    def catalog(self) -> Catalog:
        return Catalog("v1", self.tools)

    def catalog_at(self, version: str) -> Catalog | None:
        return self.catalog()


def names(tools: list[Tool]) -> list[str]:
    return [t.name for t in tools]


ON = SearchPlan("on", 20, 5)


# -- the plan ------------------------------------------------------------------------


def test_auto_turns_on_only_above_the_threshold_and_never_for_a_task_sub_agent():
    auto = SearchPlan("auto", 20, 5)
    assert not auto.is_active("interactive", 20) and auto.is_active("interactive", 21)
    assert SearchPlan("on", 20, 5).is_active("interactive", 1)
    assert not SearchPlan("off", 0, 5).is_active("interactive", 10_000)
    assert not SearchPlan("on", 0, 5).is_active(TASK, 10_000)


def test_the_tier_comes_from_the_models_capabilities():
    def model(provider: str, **caps: object) -> ModelSettings:
        return ModelSettings("m", provider, "x", capabilities=caps)

    assert tool_search_plan.tier(model("anthropic", supports_tool_search=True)) == "anthropic"
    assert tool_search_plan.tier(model("openai", supports_tool_search=True)) == "openai"
    assert tool_search_plan.tier(model("anthropic")) == tool_search_plan.tier(model("openai")) == "client"
    assert tool_search_plan.tier(None) == "client"


def test_a_workstreams_override_wins_over_the_tools_section():
    settings = ToolSettings(search="auto", search_threshold=20, search_max_results=5)
    plan = tool_search_plan.plan(settings, {"mode": "on", "max_results": 2}, None)
    assert (plan.mode, plan.threshold, plan.max_results, plan.tier) == ("on", 20, 2, "client")
    assert tool_search_plan.plan(settings, None, None) == SearchPlan("auto", 20, 5)


# -- the partition ---------------------------------------------------------------------


def test_while_search_is_on_builtins_stay_visible_and_source_tools_are_deferred():
    registry = build_registry()
    built = toolset.build(registry, [Source(DESCRIPTIONS)], "interactive", search=ON)
    builtins = names(registry.offered("interactive"))
    assert names(built.visible) == [*builtins, "tool_search"]
    assert names(built.deferred) == list(DESCRIPTIONS)
    assert built.counts() == {"visible": len(builtins), "total": len(builtins) + len(DESCRIPTIONS)}
    ctx = ToolContext("ws", "/tmp")
    refused = prepare_call(built, "c1", "slack_post_message", "{}", ctx)
    assert refused.error is not None and refused.error.startswith("Unknown tool: slack_post_message")


def test_below_the_threshold_or_off_every_tool_is_listed_and_no_tool_search():
    registry = build_registry()
    for plan in (SearchPlan("auto", 1000, 5), SearchPlan("off", 0, 5), None):
        built = toolset.build(registry, [Source(DESCRIPTIONS)], "interactive", search=plan)
        assert built.deferred == [] and built.tier is None
        assert "tool_search" not in names(built.visible) and "slack_post_message" in names(built.visible)


def test_a_task_sub_agent_never_gets_tool_search():
    built = toolset.build(build_registry(), [Source(DESCRIPTIONS)], TASK, search=ON)
    assert built.deferred == [] and "tool_search" not in names(built.visible)


def test_expanded_tools_are_visible_and_tool_search_leaves_once_nothing_is_deferred():
    registry = build_registry()
    some = toolset.build(registry, [Source(DESCRIPTIONS)], "interactive", ["weather_forecast"], ON)
    assert "weather_forecast" in names(some.visible) and "weather_forecast" not in names(some.deferred)
    every = toolset.build(registry, [Source(DESCRIPTIONS)], "interactive", list(DESCRIPTIONS), ON)
    assert every.deferred == [] and "tool_search" not in names(every.visible)
    # An expanded tool its source no longer lists is simply not there; its name is kept.
    gone = toolset.build(registry, [Source({})], "interactive", ["weather_forecast"], ON)
    assert "weather_forecast" not in names(gone.visible)


def test_native_tiers_send_deferred_tools_marked_and_take_calls_to_them():
    registry = build_registry()
    for tier in ("anthropic", "openai"):
        plan = SearchPlan("on", 20, 5, tier)
        built = toolset.build(registry, [Source(DESCRIPTIONS)], "interactive", search=plan)
        assert "tool_search" not in names(built.visible)
        schemas = built.schemas("/w", None)
        marked = [s["function"]["name"] for s in schemas if s.get("defer_loading")]
        assert marked == list(DESCRIPTIONS)
        assert built.tool("slack_post_message") is not None


# -- the tool_search tool ---------------------------------------------------------------


def search_set(max_results: int = 5) -> toolset.ToolSet:
    return toolset.build(
        build_registry(), [Source(DESCRIPTIONS)], "interactive", search=SearchPlan("on", 20, max_results)
    )


def context(settings: ToolSettings | None = None, db: Database | None = None, ws: Workstream | None = None):
    return ToolContext("ws1", "/tmp", settings=settings or ToolSettings(search="on"), db=db, workstream=ws)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"query": ""}', "the query is empty"),
        ('{"query": "   \\n\\t"}', "the query is empty"),
        ('{"query": 42}', "query must be a string"),
        ('{"query": ["a"]}', "query must be a string"),
        ('{"query": null}', "query must be a string"),
        ("{}", "query must be a string"),
        ('{"query": "' + "x" * 5000 + '"}', "longer than 1000 characters"),
        ('{"query": "a", "limit": 3}', "does not take 'limit'"),
        ("[" * 5000, "nested too deeply"),
        ('{"query": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ],
)
def test_a_bad_query_is_an_error_item_never_run(raw: str, why: str):
    prepared = prepare_call(search_set(), "c1", "tool_search", raw, context())
    assert prepared.error is not None and why in prepared.error
    assert execute_call(search_set(), prepared, context()).is_error


def test_a_bare_string_is_the_query_and_the_call_is_auto_approved():
    prepared = prepare_call(search_set(), "c1", "tool_search", "slack message", context())
    assert prepared.error is None and prepared.args == {"query": "slack message"}
    assert prepared.needs_approval is False


def test_a_search_lists_the_best_matches_with_one_line_each(tmp_path: Path):
    prepared = prepare_call(search_set(), "c1", "tool_search", '{"query": "weather city"}', context())
    outcome = execute_call(search_set(), prepared, context())
    assert not outcome.is_error
    assert outcome.output == (
        "Found 1 tool, now available to call:\n- weather_forecast: The weather forecast for a city."
    )


def test_max_results_bounds_the_matches():
    settings = ToolSettings(search="on", search_max_results=1)
    prepared = prepare_call(search_set(), "c1", "tool_search", '{"query": "github issue"}', context(settings))
    outcome = execute_call(search_set(), prepared, context(settings))
    assert outcome.output.startswith("Found 1 tool,") and outcome.output.count("\n- ") == 1


def test_a_query_that_matches_nothing_says_so_and_lists_nothing():
    handler = ts.tool(lambda ctx: (search_set().deferred, 5)).handler
    for query in ("kubernetes pods", "\x00\ud800 ☃", "z" * 1000):
        assert handler.prepare({"query": query}, context()).error is None
        outcome = handler.execute({"query": query}, context())
        assert outcome.output.startswith("No tool matches") and "\n- " not in outcome.output


def test_found_tools_are_stored_with_the_workstream_and_never_removed(tmp_path: Path):
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    from sqlmodel import SQLModel

    SQLModel.metadata.create_all(db.engine)
    with db.session() as s:
        s.add(Workstream(id="ws1", name="w", working_dir="/tmp", expanded_tools=["zz_earlier"]))
    handler = ts.tool(lambda ctx: (search_set().deferred, 5)).handler
    handler.execute({"query": "slack message"}, context(db=db))
    handler.execute({"query": "upload file bucket"}, context(db=db))
    with db.reader() as s:
        ws = s.get(Workstream, "ws1")
        assert ws is not None
        assert ws.expanded_tools == ["s3_put_object", "slack_post_message", "zz_earlier"]
    db.dispose()


def test_a_stored_tool_search_call_resolves_to_the_tool_again():
    resolved = toolset.resolve(
        build_registry(), [Source(DESCRIPTIONS)], "tool_search", "interactive", "tool_search:"
    )
    assert isinstance(resolved, Tool) and resolved.name == "tool_search"
    ws = Workstream(id="ws1", name="w", working_dir="/tmp", tool_search={"max_results": 2})
    deferred, limit = resolved.handler.find(context(ws=ws))  # type: ignore[attr-defined]
    assert limit == 2 and names(list(deferred)) == list(DESCRIPTIONS)


def test_no_tool_source_may_be_named_tool_search():
    with pytest.raises(ToolSourceError, match="taken by tool search"):
        load_sources({"tool_search": {"factory": "tests.fakes.tool_source:create", "path": "/nope"}})


# -- settings and the override --------------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({"search_max_results": 0}, "search_max_results must be a whole number 1-50"),
        ({"search_max_results": 51}, "search_max_results must be a whole number 1-50"),
        ({"search_max_results": True}, "search_max_results"),
        ({"search_max_results": "5"}, "search_max_results"),
        ({"search_threshold": -1}, "search_threshold"),
        ({"search": "maybe"}, "[tools] search must be one of auto, on, off"),
        ({"search": 1}, "[tools] search"),
    ],
)
def test_bad_search_settings_stop_the_start(tools: dict[str, object], message: str):
    with pytest.raises(SettingsError) as caught:
        Settings.from_mapping({"tools": tools}, {})
    assert message in str(caught.value)


def test_good_search_settings_load():
    tools = Settings.from_mapping(
        {"tools": {"search": "on", "search_threshold": 0, "search_max_results": 50}}, {}
    ).tools
    assert (tools.search, tools.search_threshold, tools.search_max_results) == ("on", 0, 50)


@pytest.mark.parametrize(
    "value",
    [
        [],
        "on",
        1,
        {"mode": "sometimes"},
        {"mode": None},
        {"mode": "on\x00"},
        {"mode": "\ud800"},
        {"max_results": 0},
        {"max_results": 51},
        {"max_results": 2.5},
        {"max_results": False},
        {"max_results": 10**400},
        {"threshold": -5},
        {"threshold": "20"},
        {"threshold": {"a": [[[[]]]]}},
        {"extra": 1},
        {"\x00": 1},
    ],
)
def test_a_hostile_override_is_refused_with_a_message_naming_the_key(value: object):
    with pytest.raises(SearchOverrideError) as caught:
        check_override(value)
    assert "tool_search" in str(caught.value) and len(str(caught.value)) < 300


def test_a_good_override_is_kept_as_given():
    assert check_override({"mode": "off"}) == {"mode": "off"}
    assert check_override({"mode": "on", "threshold": 3, "max_results": 50}) == {
        "mode": "on", "threshold": 3, "max_results": 50,
    }  # fmt: skip
    assert check_override(None) is None
