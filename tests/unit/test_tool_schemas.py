"""The schema files state the limits the handlers' prepare enforces, tied to the same constants:
a model that keeps to a tool's schema is never refused for a bound the schema did not state.

Numbers' bounds, enums and patterns are schema keywords (maximum, minimum, enum, pattern;
nested schemas aside); a string's length and an object's size are said in the parameter's
description ("at most N characters"), never as maxLength or maxProperties: llama.cpp compiles
every tool's schema into one grammar for the tool call, a length bound becomes a repetition,
and past its repetition cap (2,000, less for complex rules) the grammar fails to parse, which
fails every tool call of the request, not only that tool's. Each bound is listed here with the
constant prepare checks against, and each numeric or length bound is tried at its edge and one
past it, through the handler's own prepare. Every integer parameter is tried too: one with no
stated maximum must take a very large value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.coordination import children, tasklist, waits
from app.gateway.channels import DISCORD_ID
from app.gateway.request import DIRECT_TYPES, NOTIFY_MAX_MESSAGE_CHARS, NOTIFY_MAX_TITLE_CHARS
from app.memory import store as memory_store
from app.previews.kinds import KINDS
from app.settings import (
    MAX_NAME_CHARS,
    MAX_TOOL_TIMEOUT,
    MEMORY_MAX_CONTENT_CHARS,
    MEMORY_MAX_DESCRIPTION_CHARS,
    MEMORY_MAX_LIMIT,
    MIN_TOOL_TIMEOUT,
    RECALL_MAX_QUERY_CHARS,
    USER_NAME_PATTERN,
    ToolSettings,
)
from app.tools import diff_file, memory, read_resource, skill, task_agent, use_prompt, watch, write_file
from app.tools.coordinator import arguments as coordinator_arguments
from app.tools.coordinator import list_workstreams, tasks, wait_for_workstream
from app.tools.core.base import Preparation, ToolContext, ToolHandler
from app.tools.core.registry import SCHEMA_DIR, default_handlers
from app.tools.core.tool import COORDINATOR
from app.tools.memory import MEMORY_DEFAULT_LIMIT
from app.tools.recall import RECALL_DEFAULT_LIMIT, RECALL_MAX_LIMIT
from app.tools.watch import WATCH_MAX_POLLS
from app.tools.web.fetch import Fetcher
from app.tools.web.fetch.guard import FETCH_MAX_URL_CHARS
from app.tools.web.searxng import CATEGORIES
from app.tools.web_search import WEB_SEARCH_MAX_RESULTS
from tests.unit.test_fetcher import FakeResolver

BOUND_KEYWORDS = ("maximum", "minimum", "enum", "pattern")
# Bounds a constrained decoder turns into repetitions (see the module's docstring): never stated.
REPEATING_KEYWORDS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
HUGE = 10**9  # an integer no tool should refuse unless its schema says so

# (tool, parameter, keyword): the value prepare holds calls to.
BOUNDS: dict[tuple[str, str, str], int] = {
    ("bash", "timeout", "minimum"): MIN_TOOL_TIMEOUT,  # clamped, not refused
    ("bash", "timeout", "maximum"): MAX_TOOL_TIMEOUT,
    ("diff_file", "context_lines", "minimum"): 0,  # clamped, not refused
    ("diff_file", "context_lines", "maximum"): diff_file.MAX_CONTEXT,
    ("edit_file", "near_line", "minimum"): 1,
    ("memory", "content", "maxLength"): MEMORY_MAX_CONTENT_CHARS,  # said in the description
    ("memory", "description", "maxLength"): MEMORY_MAX_DESCRIPTION_CHARS,
    ("memory", "query", "maxLength"): MEMORY_MAX_CONTENT_CHARS,
    ("memory", "limit", "minimum"): 1,
    ("memory", "limit", "maximum"): MEMORY_MAX_LIMIT,
    ("notify", "message", "maxLength"): NOTIFY_MAX_MESSAGE_CHARS,
    ("notify", "title", "maxLength"): NOTIFY_MAX_TITLE_CHARS,
    ("open_preview", "title", "maxLength"): MAX_NAME_CHARS,
    ("read_file", "offset", "minimum"): 1,
    ("read_file", "limit", "minimum"): 1,
    ("read_resource", "uri", "maxLength"): read_resource.MAX_URI_CHARS,
    ("recall", "query", "maxLength"): RECALL_MAX_QUERY_CHARS,
    ("recall", "limit", "minimum"): 1,
    ("recall", "limit", "maximum"): RECALL_MAX_LIMIT,
    ("skill", "query", "maxLength"): RECALL_MAX_QUERY_CHARS,
    ("task_agent", "prompt", "maxLength"): task_agent.MAX_PROMPT_CHARS,
    ("use_prompt", "arguments", "maxProperties"): use_prompt.MAX_ARGUMENTS,
    ("watch", "name", "maxLength"): MAX_NAME_CHARS,
    ("watch", "max_polls", "minimum"): 1,
    ("watch", "max_polls", "maximum"): WATCH_MAX_POLLS,
    ("web_fetch", "url", "maxLength"): FETCH_MAX_URL_CHARS,
    ("web_search", "max_results", "minimum"): 1,
    ("web_search", "max_results", "maximum"): WEB_SEARCH_MAX_RESULTS,
    ("spawn_workstream", "prompt", "maxLength"): coordinator_arguments.MAX_PROMPT_CHARS,
    ("spawn_workstream", "name", "maxLength"): MAX_NAME_CHARS,
    ("send_to_workstream", "message", "maxLength"): coordinator_arguments.MAX_PROMPT_CHARS,
    ("wait_for_workstream", "timeout", "minimum"): 1,
    ("wait_for_workstream", "timeout", "maximum"): wait_for_workstream.MAX_TIMEOUT,
    ("tasks", "title", "maxLength"): tasklist.MAX_TITLE_CHARS,
    ("tasks", "task_id", "minimum"): 1,
}
# (tool, parameter, session kind whose variant states it, or None for the file's own schema)
ENUMS: dict[tuple[str, str, str | None], tuple[str, ...]] = {
    ("memory", "action", None): memory.ACTIONS,
    ("memory", "type", None): memory_store.TYPES,
    ("memory", "scope", None): memory_store.SCOPES,
    ("memory", "scope", COORDINATOR): tuple(s for s in memory_store.SCOPES if s != "workstream"),
    ("notify", "channel_type", None): DIRECT_TYPES,
    ("open_preview", "kind", None): KINDS,
    ("skill", "action", None): skill.ACTIONS,
    ("watch", "action", None): watch.ACTIONS,
    ("web_search", "category", None): tuple(CATEGORIES),
    ("write_file", "mode", None): write_file.MODES,
    ("spawn_workstream", "folder", None): children.FOLDERS,
    ("wait_for_workstream", "mode", None): waits.MODES,
    ("list_workstreams", "which", None): list_workstreams.WHICH,
    ("tasks", "action", None): tasks.ACTIONS,
    ("tasks", "status", None): tasklist.STATUSES,
}
PATTERNS: dict[tuple[str, str], str] = {
    ("memory", "name"): memory_store.NAME.pattern,
    ("notify", "username"): USER_NAME_PATTERN,
    ("notify", "channel_id"): DISCORD_ID.pattern,
}
# (tool, parameter): the rest of a call that prepare accepts, to try that parameter in.
CALLS: dict[tuple[str, str], dict[str, Any]] = {
    ("bash", "timeout"): {"command": "true"},
    ("diff_file", "context_lines"): {"path_a": "notes.txt", "content_b": "beta\n"},
    ("edit_file", "near_line"): {"path": "notes.txt", "old_string": "alpha", "new_string": "beta"},
    ("memory", "content"): {"action": "save", "name": "note"},
    ("memory", "description"): {"action": "save", "name": "note", "content": "c"},
    ("memory", "query"): {"action": "search"},
    ("memory", "limit"): {"action": "list"},
    ("notify", "message"): {"username": "ann"},
    ("notify", "title"): {"message": "m", "username": "ann"},
    ("open_preview", "title"): {"target": "attachment:a1"},
    ("read_file", "offset"): {"path": "notes.txt"},
    ("read_file", "limit"): {"path": "notes.txt"},
    ("read_resource", "uri"): {},
    ("recall", "query"): {},
    ("recall", "limit"): {"query": "q"},
    ("skill", "query"): {"action": "search"},
    ("task_agent", "prompt"): {},
    ("use_prompt", "arguments"): {"name": "mcp__srv__greet"},
    ("watch", "name"): {"action": "create", "command": "true"},
    ("watch", "max_polls"): {"action": "create", "name": "w", "command": "true"},
    ("web_fetch", "url"): {"question": "q"},
    ("web_search", "max_results"): {"query": "q"},
    ("spawn_workstream", "prompt"): {},
    ("spawn_workstream", "name"): {"prompt": "p"},
    ("send_to_workstream", "message"): {"ws_id": "w1"},
    ("wait_for_workstream", "timeout"): {},
    ("tasks", "title"): {"action": "add"},
    ("tasks", "task_id"): {"action": "update", "status": "done"},
}


def schema_files() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(SCHEMA_DIR.glob("*.json"))}


def stated() -> Iterator[tuple[str, str, str | None, dict[str, Any]]]:
    """(tool, parameter, kind or None, its schema) for every top-level parameter, variants too."""
    for tool, data in schema_files().items():
        for name, schema in data["parameters"]["properties"].items():
            yield tool, name, None, schema
        for kind, variant in data.get("kind_variants", {}).items():
            for name, schema in variant.get("parameters", {}).get("properties", {}).items():
                if schema is not None:
                    yield tool, name, kind, schema


def parameter(tool: str, name: str, kind: str | None = None) -> dict[str, Any]:
    data = schema_files()[tool]
    if kind is not None:
        return data["kind_variants"][kind]["parameters"]["properties"][name]
    return data["parameters"]["properties"][name]


# -- the schema files against the constants ------------------------------------------------------


DESCRIBED = ("maxLength", "maxProperties")  # BOUNDS keywords that only a description states
UNITS = {"maxLength": "characters", "maxProperties": "of them"}


@pytest.mark.parametrize(("tool", "name", "keyword"), sorted(BOUNDS))
def test_a_stated_bound_is_the_constant_prepare_checks(tool, name, keyword):
    schema = parameter(tool, name)
    if keyword in DESCRIBED:
        assert keyword not in schema
        assert f"at most {BOUNDS[tool, name, keyword]:,} {UNITS[keyword]}" in schema["description"]
    else:
        assert schema.get(keyword) == BOUNDS[tool, name, keyword]


def test_no_schema_states_a_bound_a_constrained_decoder_repeats():
    repeating = [
        f"{tool}.{name} {keyword} ({kind or 'every kind'})"
        for tool, name, kind, schema in stated()
        for keyword in REPEATING_KEYWORDS
        if keyword in schema
    ]
    assert repeating == []


@pytest.mark.parametrize(("tool", "name", "kind"), sorted(ENUMS, key=str))
def test_a_stated_enum_is_what_prepare_accepts(tool, name, kind):
    assert tuple(parameter(tool, name, kind)["enum"]) == ENUMS[tool, name, kind]


@pytest.mark.parametrize(("tool", "name"), sorted(PATTERNS))
def test_a_stated_pattern_is_the_one_prepare_matches_whole(tool, name):
    assert parameter(tool, name)["pattern"] == f"^{PATTERNS[tool, name]}$"


def is_tied(tool: str, name: str, kind: str | None, keyword: str) -> bool:
    if keyword == "enum":
        return (tool, name, kind) in ENUMS
    if keyword == "pattern":
        return kind is None and (tool, name) in PATTERNS
    return kind is None and (tool, name, keyword) in BOUNDS


def test_every_bound_in_a_schema_file_is_tied_to_a_constant_here():
    untied = [
        f"{tool}.{name} {keyword} ({kind or 'every kind'})"
        for tool, name, kind, schema in stated()
        for keyword in BOUND_KEYWORDS
        if keyword in schema and not is_tied(tool, name, kind, keyword)
    ]
    assert untied == []


# -- the bounds against prepare ------------------------------------------------------------------


@pytest.fixture
def handlers() -> dict[str, ToolHandler]:
    prompts = {"mcp__srv__greet": {"server": "srv", "prompt": "greet", "arguments": []}}
    return {
        **default_handlers(),
        "read_resource": read_resource.Handler(None, lambda uri: "srv"),  # type: ignore[arg-type]
        "use_prompt": use_prompt.Handler(None, lambda: prompts),  # type: ignore[arg-type]
    }


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "notes.txt").write_text("alpha\n")
    return ToolContext(
        "ws",
        str(tmp_path),
        settings=ToolSettings(searxng_url="http://searxng.test"),
        read_paths={str((tmp_path / "notes.txt").resolve())},
        fetcher=Fetcher(resolver=FakeResolver()),
    )


def test_memory_and_recall_say_their_default_and_their_cap(handlers, ctx):
    for tool, default, cap, call in (
        ("memory", MEMORY_DEFAULT_LIMIT, MEMORY_MAX_LIMIT, {"action": "list"}),
        ("recall", RECALL_DEFAULT_LIMIT, RECALL_MAX_LIMIT, {"query": "q"}),
    ):
        description = parameter(tool, "limit")["description"]
        assert f"1 to {cap}. Default {default}." in description and default == 20
        assert handlers[tool].prepare(call, ctx).args["limit"] == default


def value_of_size(tool: str, name: str, keyword: str, size: int) -> Any:
    """A value of that parameter as large as `size` says, valid in every other way."""
    if keyword == "maxProperties":
        return {f"key{n}": "v" for n in range(size)}
    if keyword == "maxLength":
        start = "http://public.test/" if (tool, name) == ("web_fetch", "url") else ""
        return start + "a" * (size - len(start))
    return size


def prepared(
    handlers: dict[str, ToolHandler], ctx: ToolContext, tool: str, name: str, value: Any
) -> Preparation:
    """That parameter's `value` in a call that prepare otherwise accepts."""
    return handlers[tool].prepare({**CALLS[tool, name], name: value}, ctx)


@pytest.mark.parametrize(("tool", "name", "keyword"), sorted(BOUNDS))
def test_prepare_takes_the_stated_bound_and_nothing_past_it(handlers, ctx, tool, name, keyword):
    bound = BOUNDS[tool, name, keyword]
    at = prepared(handlers, ctx, tool, name, value_of_size(tool, name, keyword, bound))
    assert at.error is None, at.error
    past = bound - 1 if keyword == "minimum" else bound + 1
    beyond = prepared(handlers, ctx, tool, name, value_of_size(tool, name, keyword, past))
    # Past the bound: refused, or (bash's timeout, diff_file's context) brought back to it.
    assert beyond.error is not None or beyond.args[name] == bound, beyond


def test_every_integer_parameter_is_tried_at_its_bounds():
    integers = {(tool, name) for tool, name, _kind, schema in stated() if schema.get("type") == "integer"}
    assert integers <= set(CALLS)


@pytest.mark.parametrize(
    ("tool", "name"),
    sorted((t, n) for t, n, _k, s in stated() if s.get("type") == "integer" and (t, n) in CALLS),
)
def test_an_integer_with_no_stated_maximum_is_never_refused_for_its_size(handlers, ctx, tool, name):
    largest = parameter(tool, name).get("maximum", HUGE)
    got = prepared(handlers, ctx, tool, name, largest)
    assert got.error is None, got.error
