"""The MCP catalog as a model sees it: names that fit, skipped tools with a warning, a stable version,
the system prompt's MCP sections and the approval labels."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from app.engine.conversation import prompt
from app.mcp.catalog import MCPToolSource, build_offer
from app.mcp.config import parse_server
from app.mcp.manager import MCPManager, ServerView
from app.mcp.names import model_name
from app.mcp.prompt import MAX_PROMPTS, MAX_RESOURCES, sections
from app.mcp.states import Listing
from app.settings import Settings
from app.storage.models import Workstream
from app.tools.core.registry import build_registry
from app.tools.core.tool import TOOL_NAME_PATTERN, approval_label
from app.tools.core.tool_search_plan import SearchPlan
from app.tools.core.toolset import build

MANAGER = MCPManager({})


def tool(name: str, schema: Any = None) -> types.Tool:
    return types.Tool(name=name, description=f"does {name}", input_schema=schema or {"type": "object"})


def view(server: str, state: str = "connected", **listing: Any) -> ServerView:
    return ServerView(parse_server(server, {"command": "x"}, "config"), state, None, Listing(**listing))


def test_names_fit_providers_and_are_deterministic() -> None:
    assert model_name("github", "search_repos") == "mcp__github__search_repos"
    long = model_name("srv", "a" * 100)
    assert len(long) == 64 and TOOL_NAME_PATTERN.match(long) and long == model_name("srv", "a" * 100)
    assert model_name("srv", "a" * 100) != model_name("srv", "a" * 99 + "b")
    odd = model_name("srv", "get.thing/ü")
    assert TOOL_NAME_PATTERN.match(odd) and odd.startswith("mcp__srv__get_thing")


def test_a_clash_and_an_unusable_schema_are_skipped_with_a_warning() -> None:
    offer = build_offer(
        [
            view(
                "s",
                tools=(
                    tool("a.b"),
                    tool("a/b"),  # maps to the same cleaned-up name? no: hashed apart
                    tool("ok"),
                    tool("ok"),
                    tool("arr", {"type": "array"}),
                ),
            ),
            view("down", state="error", tools=(tool("x"),)),
        ],
        MANAGER,
    )
    names = [t.name for t in offer.catalog.tools]
    assert names.count("mcp__s__ok") == 1 and not any("down" in n for n in names)
    warnings = offer.warnings["s"]
    assert any("'ok'" in w and "already taken" in w for w in warnings)
    assert any("'arr'" in w and "type object" in w for w in warnings)


def test_a_schema_without_a_type_becomes_an_object_schema_another_type_is_refused() -> None:
    typeless = {"properties": {"q": {"type": "string"}}, "required": ["q"]}
    schemas = {"empty": {}, "typeless": typeless, "text": {"type": "string"}, "odd": {"properties": [1]}}
    listed = tuple(types.Tool(name=n, description=n, input_schema=s) for n, s in schemas.items())
    offer = build_offer([view("s", tools=listed)], MANAGER)
    offered = {t.name: t.schema("interactive", "/tmp", None)["function"] for t in offer.catalog.tools}
    assert offered["mcp__s__empty"]["parameters"] == {"type": "object", "properties": {}}
    assert offered["mcp__s__typeless"]["parameters"] == {"type": "object", **typeless}
    assert set(offered) == {"mcp__s__empty", "mcp__s__typeless"}
    assert offer.warnings["s"] == (
        "tool 'text': tool mcp__s__text: parameters must be a JSON schema of type object; skipped",
        "tool 'odd': tool mcp__s__odd: parameters.properties must be an object; skipped",
    )


def test_length_and_size_bounds_are_said_in_words_not_as_repetitions_a_grammar_must_expand() -> None:
    # llama.cpp compiles all offered tools into one tool-call grammar; a maxLength of 65,536 in
    # one server's tool would fail every tool call of the request there.
    schema = {
        "type": "object",
        "properties": {
            "script": {"type": "string", "maxLength": 65536, "description": "The script"},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 10},
            "either": {"anyOf": [{"type": "string", "maxLength": 5000}, {"type": "null"}]},
            "maxLength": {"type": "integer", "default": {"maxLength": 3}},  # a parameter so named
        },
        "required": ["script"],
        "maxProperties": 4,
    }
    offer = build_offer([view("s", tools=(tool("run", schema),))], MANAGER)
    [offered] = [t.schema("interactive", "/tmp", None)["function"]["parameters"] for t in offer.catalog.tools]
    text = json.dumps(offered)
    for keyword in ("minLength", "maxItems", "maxProperties"):
        assert keyword not in text
    props = offered["properties"]
    assert props["script"] == {"type": "string", "description": "The script (at most 65,536 characters)"}
    assert props["tags"]["description"] == "at most 10 items"
    assert props["tags"]["items"]["description"] == "at least 1 character"
    assert props["either"]["anyOf"][0] == {"type": "string", "description": "at most 5,000 characters"}
    assert props["maxLength"] == {"type": "integer", "default": {"maxLength": 3}}
    assert offered["description"] == "at most 4 entries" and offered["required"] == ["script"]


def test_the_version_follows_the_definitions_only() -> None:
    one = build_offer([view("s", tools=(tool("a"),))], MANAGER).catalog.version
    again = build_offer([view("s", tools=(tool("a"),))], MCPManager({})).catalog.version
    other = build_offer([view("s", tools=(tool("b"),))], MANAGER).catalog.version
    assert one == again != other


def test_mcp_tools_come_after_the_builtins_and_reach_task_agents() -> None:
    registry = build_registry()

    class Source(MCPToolSource):
        def offer(self) -> Any:
            return build_offer([view("s", tools=(tool("t"),))], MANAGER)

    source = Source(MANAGER)
    interactive = build(registry, [source], "interactive")
    assert interactive.offered_names()[-1] == "mcp__s__t"
    assert "mcp__s__t" in build(registry, [source], "task").offered_names()


def test_system_prompt_sections_list_resources_and_prompts_with_caps() -> None:
    registry = build_registry()
    resources = tuple(
        {"uri": f"r://{n}", "name": f"r{n}", "description": f"res {n}\n<b>", "mimeType": None, "server": "s"}
        for n in range(60)
    )
    prompts = tuple(types.Prompt(name=f"p{n}", description="a prompt") for n in range(40))
    views = [view("s", resources=resources, prompts=prompts)]

    class Source(MCPToolSource):
        def offer(self) -> Any:
            return build_offer(views, MANAGER, self._catalog_tools)

    source = Source(MANAGER, {n: d for n in ("read_resource", "use_prompt") if (d := registry.definition(n))})
    ws = Workstream(id="w1", name="w", working_dir="/tmp")
    tools = build(registry, [source], "interactive")
    text = prompt.build(prompt.PromptContext(ws, tools, Settings()), [*prompt.SECTIONS, *sections(source)])
    block = text.split("<mcp-resources>\n")[1].split("\n</mcp-resources>")[0]
    assert len(block.splitlines()) == MAX_RESOURCES and "r://0  res 0 ‹b›" in block
    assert "</mcp-resources>\nUse read_resource(uri='...') to access the resources listed above." in text
    listed = text.split("<mcp-prompts>\n")[1].split("\n</mcp-prompts>")[0]
    assert len(listed.splitlines()) == MAX_PROMPTS and "mcp__s__p0()  a prompt" in listed
    coordinator = build(registry, [source], "coordinator")
    alone = prompt.build(prompt.PromptContext(ws, coordinator, Settings()), sections(source))
    assert "<mcp-resources>" not in alone  # no read_resource, no list


def test_read_resource_and_use_prompt_stay_in_view_while_tool_search_defers_mcp_tools() -> None:
    registry = build_registry()
    resources = ({"uri": "r://a", "name": "a", "description": "res a", "mimeType": None, "server": "s"},)
    views = [view("s", tools=tuple(tool(f"t{n}") for n in range(30)), resources=resources,
                  prompts=(types.Prompt(name="p", description="a prompt"),))]  # fmt: skip

    class Source(MCPToolSource):
        def offer(self) -> Any:
            return build_offer(views, MANAGER, self._catalog_tools)

    source = Source(MANAGER, {n: d for n in ("read_resource", "use_prompt") if (d := registry.definition(n))})
    tools = build(registry, [source], "interactive", search=SearchPlan("on", 20, 5))
    assert tools.tier == "client" and tools.is_deferred("mcp__s__t0")
    assert {"read_resource", "use_prompt", "tool_search"} <= set(tools.offered_names())
    assert not tools.is_deferred("read_resource") and tools.tool("use_prompt") is not None
    ws = Workstream(id="w1", name="w", working_dir="/tmp")
    text = prompt.build(prompt.PromptContext(ws, tools, Settings()), sections(source))
    assert "<mcp-resources>" in text and "<mcp-prompts>" in text


def test_always_approves_one_resource_or_prompt_not_the_tool() -> None:
    assert approval_label("read_resource", {"uri": "fake://a"}) == "read_resource:fake://a"
    assert approval_label("use_prompt", {"name": "mcp__s__p"}) == "use_prompt:mcp__s__p"
    assert approval_label("mcp__s__t", {"x": 1}) == "mcp__s__t"
    assert approval_label("read_resource", {"uri": 5}) == "read_resource"
