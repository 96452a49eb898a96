"""Tools from sources beside the built-ins: what a step's ToolSet offers, and how a stored call
resolves its tool again."""

from __future__ import annotations

import pytest

from app.tools.core import toolset
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.pipeline import ArgumentsError, execute_call, parse_arguments, prepare_call
from app.tools.core.registry import build_registry
from app.tools.core.tool import TASK, Tool, ToolDefinition
from app.tools.core.tool_search_plan import SearchPlan
from app.tools.core.toolset import Catalog

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}


class Echo:
    def prepare(self, args, ctx):  # type: ignore[no-untyped-def]
        return Preparation(args, header="echo", needs_approval=True)

    def execute(self, args, ctx):  # type: ignore[no-untyped-def]
        return ToolOutcome(f"echo {args}")


def tool(name: str, version: str = "v1", **meta: object) -> Tool:
    return Tool(ToolDefinition(name, f"The {name} tool.", OBJECT, dict(meta)), Echo(), "src", version)


class Source:
    def __init__(self, *tools: Tool, version: str = "v1", history: dict[str, Catalog] | None = None) -> None:
        self.name = "src"
        self.current = Catalog(version, tools)
        self.history = history or {}

    def catalog(self) -> Catalog:
        return self.current

    def catalog_at(self, version: str) -> Catalog | None:
        return self.history.get(version)


class Broken:
    name = "broken"

    def catalog(self) -> Catalog:
        raise ConnectionError("server went away")

    def catalog_at(self, version: str) -> Catalog | None:
        raise AssertionError("not asked")


def names(tools: list[Tool]) -> list[str]:
    return [t.name for t in tools]


def test_a_source_tool_is_offered_after_the_builtins_with_its_catalog_version():
    built = toolset.build(build_registry(), [Source(tool("lookup"))], "interactive")
    assert names(built.visible)[-1] == "lookup" and "bash" in names(built.visible)
    assert built.tool("lookup").catalog_version == "src:v1"
    assert built.tool("bash").catalog_version is None
    schemas = built.schemas("/work", None)
    assert schemas[-1]["function"] == {
        "name": "lookup",
        "description": "The lookup tool.",
        "parameters": OBJECT,
    }


def test_a_deferred_tool_is_offered_only_to_the_workstream_that_expanded_it():
    source = Source(tool("rare"))
    registry = build_registry()
    search = SearchPlan(mode="on", threshold=20, max_results=5)
    expanded = toolset.build(registry, [source], "interactive", expanded=["rare"], search=search)
    other = toolset.build(registry, [source], "interactive", search=search)
    assert "rare" in names(expanded.visible)
    assert "rare" not in names(other.visible) and names(other.deferred) == ["rare"]
    ctx = ToolContext("ws", "/tmp")
    assert prepare_call(other, "c1", "rare", "{}", ctx).error.startswith("Unknown tool: rare")
    assert prepare_call(expanded, "c1", "rare", "{}", ctx).error is None


def test_a_source_tool_that_clashes_or_that_a_model_would_refuse_is_left_out(caplog):
    source = Source(tool("bash"), tool("has space"), tool("x" * 65), tool("fine"))
    built = toolset.build(build_registry(), [source], "interactive")
    assert names(built.visible).count("bash") == 1 and built.tool("bash").is_builtin
    assert "fine" in names(built.visible) and "has space" not in names(built.visible)
    assert "clashes" in caplog.text and "is not 1-64 letters" in caplog.text


def test_a_broken_source_costs_its_own_tools_only():
    built = toolset.build(build_registry(), [Broken(), Source(tool("lookup"))], "interactive")
    assert "lookup" in names(built.visible) and "bash" in names(built.visible)


def test_a_stored_call_resolves_the_version_the_model_saw_or_says_it_is_gone():
    old, new = tool("lookup", "v1"), tool("lookup", "v2")
    source = Source(new, version="v2", history={"v1": Catalog("v1", (old,))})
    registry = build_registry()
    assert toolset.resolve(registry, [source], "lookup", "interactive", "src:v1") is old
    assert toolset.resolve(registry, [source], "lookup", "interactive", "src:v9") is new  # forgotten: current
    gone = Source(version="v3")
    assert toolset.resolve(registry, [gone], "lookup", "interactive", "src:v1").startswith(
        "Error: tool lookup is gone: src no longer offers it"
    )
    assert "no longer configured" in toolset.resolve(registry, [], "lookup", "interactive", "src:v1")
    assert toolset.resolve(registry, [], "bash", "interactive", None).is_builtin


def test_execute_runs_the_resolved_tool_and_refuses_a_missing_one():
    call = prepare_call(
        toolset.ToolSet("interactive", [tool("lookup")]), "c1", "lookup", '{"q": "x"}', ToolContext("w", "/")
    )
    assert execute_call(tool("lookup"), call, ToolContext("w", "/")).output == "echo {'q': 'x'}"
    assert execute_call(None, call, ToolContext("w", "/")).is_error


def test_a_tool_without_a_primary_key_takes_only_json_objects():
    assert parse_arguments('{"q": "x"}', None) == {"q": "x"}
    for raw in ("ls -la", '"a string"', "42", "true"):
        with pytest.raises(ArgumentsError, match="JSON object"):
            parse_arguments(raw, None)


def test_the_task_kind_skips_approval_only_for_auto_approve_tools():
    asks = Preparation({}, "h", needs_approval=True)
    auto = Tool(ToolDefinition("t", "d", OBJECT, {"auto_approve": True, "task_agent": True}), Echo())
    plain = Tool(ToolDefinition("t", "d", OBJECT, {"task_agent": True}), Echo())
    assert auto.needs_approval(asks, TASK) is False and auto.needs_approval(asks, "interactive") is True
    assert plain.needs_approval(asks, TASK) is True


def make_source(name: str, options: dict) -> Source:
    source = Source(tool(options["tool"]))  # always named "src": a factory that ignores its name
    return source


def test_configured_sources_load_by_factory_with_their_options():
    from app.settings import Settings, SettingsError
    from app.tools.core.sources import ToolSourceError, load_sources

    config = {"tool_sources": {"src": {"factory": "tests.unit.test_toolset:make_source", "tool": "lookup"}}}
    (source,) = load_sources(Settings.from_mapping(config, {}).tool_sources)
    assert source.name == "src" and names(list(source.catalog().tools)) == ["lookup"]
    with pytest.raises(SettingsError, match=r"\[tool_sources.bad\] needs factory"):
        Settings.from_mapping({"tool_sources": {"bad": {"factory": "no_colon"}}}, {})
    with pytest.raises(ToolSourceError, match="cannot load nowhere:thing"):
        load_sources({"gone": {"factory": "nowhere:thing"}})
    with pytest.raises(ToolSourceError, match="must be named 'other'"):
        load_sources({"other": {"factory": "tests.unit.test_toolset:make_source", "tool": "x"}})
