"""The coordinator tools' prepare: hostile arguments are refused as data for the model (an
`Error:` preparation), never a crash; valid ones are normalised; outside a coordinator the
tools say so."""

from __future__ import annotations

import pytest

from app.tools.coordinator import arguments
from app.tools.core.base import ToolContext
from app.tools.core.registry import build_registry

COORDINATOR_TOOLS = [name for name in build_registry().offered_names("coordinator") if name != "memory"]
HOSTILE = [
    "\x00",
    "a\x00b",
    "\ud800",
    "x" * (arguments.MAX_PROMPT_CHARS + 1),
    7,
    True,
    None,
    [],
    {"a": {"b": {"c": {}}}},
    [[[[["deep"]]]]],
    -1,
    10**30,
]


@pytest.fixture
def ctx(tmp_path):
    return ToolContext(ws_id="c1", working_dir=str(tmp_path), kind="coordinator")


@pytest.mark.parametrize("tool", COORDINATOR_TOOLS)
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_hostile_value_in_any_parameter_is_refused_or_normalised_never_raised(tool, value, ctx):
    registry = build_registry()
    handler = registry.handler(tool)
    for name in registry.definition(tool).parameters["properties"]:
        prep = handler.prepare({name: value}, ctx)
        if prep.error is None:  # taken: only what the schema allows reaches execute
            for key, kept in prep.args.items():
                assert not (isinstance(kept, str) and ("\x00" in kept or "\ud800" in kept)), (name, key)
        else:
            assert prep.error.startswith(f"Error: {tool}: ") and not prep.needs_approval


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("spawn_workstream", {"prompt": "do it"}, {"prompt": "do it", "folder": "own"}),
        ("spawn_workstream", {"prompt": "p", "folder": "shared", "name": "n"}, None),
        ("spawn_batch", {"workstreams": [{"prompt": "a"}, {"prompt": "b"}], "context": "bg"}, None),
        ("wait_for_workstream", {"ws_id": "w1"}, {"ws_ids": ["w1"], "mode": "all", "timeout": 600}),
        ("wait_for_workstream", {}, {"ws_ids": [], "mode": "all", "timeout": 600}),
        ("wait_for_workstream", {"ws_ids": ["a", "a", "b"], "mode": "any", "timeout": 5}, None),
        ("tasks", {"action": "add", "title": "t"}, {"action": "add", "title": "t"}),
        ("tasks", {"action": "update", "task_id": 2, "status": "done"}, None),
        ("list_workstreams", {}, {"which": "open"}),
    ],
)
def test_valid_arguments_are_taken(tool, args, expected, ctx):
    prep = build_registry().handler(tool).prepare(args, ctx)
    assert prep.error is None, prep.error
    if expected is not None:
        assert prep.args == expected


def test_batch_context_goes_before_each_prompt_and_waits_drop_repeats(ctx):
    registry = build_registry()
    batch = registry.handler("spawn_batch").prepare(
        {"workstreams": [{"prompt": "a"}, {"prompt": "b"}], "context": "bg"}, ctx
    )
    assert [w["prompt"] for w in batch.args["workstreams"]] == ["bg\n\na", "bg\n\nb"]
    wait = registry.handler("wait_for_workstream").prepare({"ws_ids": ["a", "a", "b"]}, ctx)
    assert wait.args["ws_ids"] == ["a", "b"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("spawn_batch", {"workstreams": [{"prompt": "p"}] * 11}),
        ("spawn_batch", {"workstreams": []}),
        ("spawn_batch", {"workstreams": ["not an object"]}),
        ("wait_for_workstream", {"ws_ids": ["w"] * 51}),
        ("wait_for_workstream", {"timeout": 0}),
        ("wait_for_workstream", {"timeout": 1.5}),
        ("wait_for_workstream", {"ws_ids": ["x" * 33]}),
        ("tasks", {"action": "update", "task_id": 1}),
        ("tasks", {"action": "update", "task_id": True, "status": "done"}),
        ("spawn_workstream", {"prompt": "   "}),
        ("spawn_workstream", {"prompt": "p", "folder": "/etc"}),
    ],
)
def test_out_of_range_arguments_are_refused(tool, args, ctx):
    prep = build_registry().handler(tool).prepare(args, ctx)
    assert prep.error is not None and prep.error.startswith(f"Error: {tool}: ")


@pytest.mark.parametrize("tool", COORDINATOR_TOOLS)
def test_outside_a_coordinator_the_tools_say_so(tool, ctx):
    outcome = build_registry().handler(tool).execute({"ws_id": "w1", "ws_ids": ["w1"], "mode": "all"}, ctx)
    assert outcome.is_error and "coordinator" in outcome.output
