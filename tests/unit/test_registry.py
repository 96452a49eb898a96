"""The registry: schema files checked against handlers, and the sets derived from them."""

import copy
import json
import types

import pytest

from app.tools.core.base import Preparation, ToolOutcome
from app.tools.core.registry import SCHEMA_DIR, RegistryError, build_registry

INTERACTIVE_TOOLS = {
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "diff_file",
    "search",
    "web_fetch",
    "web_search",
    "open_preview",
    "task_agent",
    "memory",
    "recall",
    "notify",
    "watch",
    "read_resource",
    "use_prompt",
    "skill",
}
# The coordinator kind's own tools (coordinator: true, not interactive): with the 17 above, the
# reference's 29.
COORDINATOR_ONLY = {
    "spawn_workstream",
    "spawn_batch",
    "wait_for_workstream",
    "inspect_workstream",
    "send_to_workstream",
    "cancel_workstream",
    "close_workstream",
    "delete_workstream",
    "list_workstreams",
    "list_nodes",
    "tasks",
    "close_all_children",
}
# Background shells (bash run_in_background): reading and stopping one, wherever bash is offered.
SHELL_TOOLS = {"bash_output", "kill_shell"}
ALL_TOOLS = INTERACTIVE_TOOLS | COORDINATOR_ONLY | SHELL_TOOLS
SCHEMA_KEYS = {"name", "description", "parameters"}


def fake_handler():
    return types.SimpleNamespace(
        prepare=lambda args, ctx: Preparation(args, "fake"),
        execute=lambda args, ctx: ToolOutcome("ok"),
    )


def handlers_for(*names):
    return {name: fake_handler() for name in names}


def names(definitions):
    return {d.name for d in definitions}


def offered(registry, kind, workspace_dir=None):
    return [t["function"]["name"] for t in registry.model_tools(kind, "/work", workspace_dir)]


def write_schema(directory, filename, **overrides):
    schema = {
        "name": filename,
        "description": "A tool for tests.",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        "primary_key": "x",
        **overrides,
    }
    schema = {k: v for k, v in schema.items() if v is not None}
    (directory / f"{filename}.json").write_text(json.dumps(schema))


def test_every_builtin_tool_has_a_schema_file():
    assert len(INTERACTIVE_TOOLS | COORDINATOR_ONLY) == 29  # the reference's count, shells aside
    assert build_registry().builtin_tool_names == frozenset(ALL_TOOLS)
    assert {p.stem for p in SCHEMA_DIR.glob("*.json")} == ALL_TOOLS


def test_primary_key_map_follows_the_spec():
    assert build_registry().primary_key_map == {
        "bash": "command",
        "read_file": "path",
        "write_file": "content",
        "edit_file": "old_string",
        "diff_file": "path_a",
        "search": "query",
        "web_fetch": "url",
        "web_search": "query",
        "open_preview": "target",
        "task_agent": "prompt",
        "memory": "name",
        "recall": "query",
        "notify": "message",
        "watch": "command",
        "read_resource": "uri",
        "use_prompt": "name",
        "skill": "name",
        "spawn_workstream": "prompt",
        "spawn_batch": "context",
        "wait_for_workstream": "ws_id",
        "inspect_workstream": "ws_id",
        "send_to_workstream": "message",
        "cancel_workstream": "ws_id",
        "close_workstream": "ws_id",
        "delete_workstream": "ws_id",
        "list_workstreams": "which",
        "list_nodes": "name",
        "tasks": "action",
        "close_all_children": "reason",
        "bash_output": "shell_id",
        "kill_shell": "shell_id",
    }


def test_task_agent_tools_follow_the_summary_table():
    assert names(build_registry().task_agent_tools) == {
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "diff_file",
        "search",
        "web_fetch",
        "web_search",
        "notify",
        "read_resource",
        "use_prompt",
        "bash_output",
        "kill_shell",
    }


def test_task_auto_tools_include_web_tools_per_resolutions():
    # a coordinator's reading and spawning tools run unprompted; closing and deleting ask
    asking = {"close_workstream", "delete_workstream", "close_all_children"}
    assert build_registry().task_auto_tools - (COORDINATOR_ONLY - asking) == {
        "read_file",
        "diff_file",
        "search",
        "web_fetch",
        "web_search",
        "memory",
        "recall",
        "notify",
        "bash_output",  # reading and stopping a shell the agent started asks nobody
        "kill_shell",
    }


def test_memory_is_the_one_dual_kind_tool():
    registry = build_registry()
    assert names(registry.coordinator_tools) == COORDINATOR_ONLY | {"memory"}
    assert names(registry.interactive_tools) == INTERACTIVE_TOOLS | SHELL_TOOLS


def test_tools_keep_their_metadata():
    bash = build_registry().definition("bash")
    assert bash.meta["primary_key"] == "command"
    assert bash.to_dict()["task_agent"] is True


def test_only_tools_with_a_handler_are_offered():
    assert offered(build_registry(), "interactive") == [
        "bash",
        "bash_output",
        "diff_file",
        "edit_file",
        "kill_shell",
        "memory",
        "notify",
        "open_preview",
        "read_file",
        "recall",
        "search",
        "skill",
        "task_agent",
        "watch",
        "web_fetch",
        "web_search",
        "write_file",
    ]
    assert "task_agent" not in offered(build_registry(), "task")  # a sub-agent starts none


def test_task_kind_offers_task_agent_tools_only():
    registry = build_registry(handlers_for("bash", "task_agent", "memory", "read_file"))
    assert offered(registry, "task") == ["bash", "read_file"]


def test_coordinator_kind_offers_coordinator_tools_only():
    registry = build_registry(handlers_for("bash", "memory"))
    assert offered(registry, "coordinator") == ["memory"]


def test_model_tools_strip_metadata():
    registry = build_registry(handlers_for(*ALL_TOOLS))
    for tool in registry.model_tools("interactive", "/work", "/shared"):
        assert set(tool) == {"type", "function"}
        assert set(tool["function"]) == SCHEMA_KEYS


def test_cwd_note_is_appended_with_the_working_dir():
    (tool,) = build_registry(handlers_for("bash")).model_tools("interactive", "/srv/project", None)
    assert tool["function"]["description"].endswith("working directory, /srv/project.")
    assert "{working_dir}" not in tool["function"]["description"]


def test_workspace_note_names_the_workspace_dir():
    (tool,) = build_registry(handlers_for("bash")).model_tools("interactive", "/work", "/srv/shared")
    assert "/srv/shared" in tool["function"]["description"]


def test_workspace_note_is_dropped_when_there_is_no_workspace():
    (tool,) = build_registry(handlers_for("bash")).model_tools("interactive", "/work", None)
    assert "workspace" not in tool["function"]["description"]


def test_kind_variant_overlays_memory_for_coordinators():
    registry = build_registry(handlers_for("memory"))
    (coordinator,) = registry.model_tools("coordinator", "/work", None)
    (interactive,) = registry.model_tools("interactive", "/work", None)
    scope = coordinator["function"]["parameters"]["properties"]["scope"]
    assert "workstream" not in scope["enum"]
    assert "workstream" in interactive["function"]["parameters"]["properties"]["scope"]["enum"]
    assert coordinator["function"]["description"] != interactive["function"]["description"]


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown session kind"):
        build_registry().model_tools("robot", "/work", None)


def test_handler_lookup():
    registry = build_registry()
    assert registry.has_handler("bash") and not registry.has_handler("use_prompt")
    assert callable(registry.handler("bash").execute)
    with pytest.raises(KeyError):
        registry.handler("use_prompt")


def test_a_handler_without_a_schema_is_refused():
    with pytest.raises(RegistryError, match="no schema file: ghost"):
        build_registry({**handlers_for("bash"), "ghost": fake_handler()})


def test_a_handler_without_execute_is_refused():
    with pytest.raises(RegistryError, match="lacks prepare"):
        build_registry({"bash": types.SimpleNamespace(prepare=lambda a, c: None)})


def test_a_name_that_differs_from_the_file_name_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", name="beta")
    with pytest.raises(RegistryError, match="does not match the file name"):
        build_registry({}, tmp_path)


def test_duplicate_names_are_refused(tmp_path):
    write_schema(tmp_path, "alpha")
    write_schema(tmp_path, "beta", name="alpha")
    with pytest.raises(RegistryError, match="duplicate tool name 'alpha'"):
        build_registry({}, tmp_path)


def test_a_schema_without_primary_key_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", primary_key=None)
    with pytest.raises(RegistryError, match="missing 'primary_key'"):
        build_registry({}, tmp_path)


def test_a_primary_key_that_is_not_a_parameter_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", primary_key="y")
    with pytest.raises(RegistryError, match="is not a parameter"):
        build_registry({}, tmp_path)


def test_an_unknown_metadata_key_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", always_on=True)
    with pytest.raises(RegistryError, match="unknown key.*always_on"):
        build_registry({}, tmp_path)


def test_a_non_boolean_flag_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", auto_approve="yes")
    with pytest.raises(RegistryError, match="'auto_approve' must be true or false"):
        build_registry({}, tmp_path)


def test_a_variant_for_an_unknown_kind_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", kind_variants={"robot": {"description": "x"}})
    with pytest.raises(RegistryError, match="unknown kind 'robot'"):
        build_registry({}, tmp_path)


def test_a_cwd_note_without_its_placeholder_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", cwd_note="Runs somewhere.")
    with pytest.raises(RegistryError, match="must contain"):
        build_registry({}, tmp_path)


def test_invalid_json_is_refused(tmp_path):
    (tmp_path / "alpha.json").write_text("{not json")
    with pytest.raises(RegistryError, match="alpha.json: cannot load"):
        build_registry({}, tmp_path)


def test_an_empty_schema_dir_is_refused(tmp_path):
    with pytest.raises(RegistryError, match="no tool schema files"):
        build_registry({}, tmp_path)


def test_a_valid_custom_schema_dir_loads(tmp_path):
    write_schema(tmp_path, "alpha", task_agent=True)
    registry = build_registry(handlers_for("alpha"), tmp_path)
    assert offered(registry, "task") == ["alpha"]


# -- the schema files against the spec's parameter tables ----------------------

# tool: (required parameters, optional parameters), as TOOLS-SPEC.md lists them
SPEC_PARAMETERS = {
    "bash": ({"command"}, {"timeout", "stop_on_error", "run_in_background"}),  # the last: issue 45
    "read_file": ({"path"}, {"offset", "limit"}),
    "write_file": ({"path", "content"}, {"mode"}),
    "edit_file": ({"path"}, {"old_string", "new_string", "near_line", "edits", "replace_all"}),
    "diff_file": ({"path_a"}, {"path_b", "content_b", "context_lines"}),
    "search": ({"query"}, {"path"}),
    "web_fetch": ({"url", "question"}, set()),
    "web_search": ({"query"}, {"max_results", "category"}),
    "open_preview": ({"target"}, {"kind", "title"}),
    "task_agent": ({"prompt"}, set()),
    "memory": ({"action"}, {"name", "content", "description", "type", "scope", "query", "limit"}),
    "recall": ({"query"}, {"limit"}),
    "notify": ({"message"}, {"username", "channel_type", "channel_id", "title"}),
    "watch": ({"action"}, {"command", "poll_every", "stop_on", "name", "max_polls"}),
    "read_resource": ({"uri"}, set()),
    "use_prompt": ({"name"}, {"arguments"}),
    "skill": ({"action"}, {"name", "query"}),
}


@pytest.mark.parametrize("tool", sorted(SPEC_PARAMETERS))
def test_schema_parameters_follow_the_spec(tool):
    required, optional = SPEC_PARAMETERS[tool]
    parameters = build_registry().definition(tool).parameters
    assert set(parameters["required"]) == required
    assert set(parameters["properties"]) == required | optional


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_every_parameter_is_described_for_the_model(tool):
    for name, schema in build_registry().definition(tool).parameters["properties"].items():
        assert schema.get("type"), f"{tool}.{name} has no type"
        assert schema.get("description", "").strip(), f"{tool}.{name} has no description"


def test_bash_timeout_is_declared_as_1_to_600_seconds():
    timeout = build_registry().definition("bash").parameters["properties"]["timeout"]
    assert (timeout["type"], timeout["minimum"], timeout["maximum"]) == ("integer", 1, 600)


@pytest.mark.parametrize(
    ("tool", "auto_approve"),
    [
        ("bash", False),
        ("read_file", True),
        ("write_file", False),
        ("edit_file", False),
        ("diff_file", True),
        ("search", True),
        # RESOLUTIONS: true puts them in TASK_AUTO_TOOLS; interactive sessions still ask.
        ("web_fetch", True),
        ("web_search", True),
        ("open_preview", False),
        ("task_agent", False),
        ("memory", True),
        ("recall", True),
        ("notify", True),
        ("watch", False),
        ("read_resource", False),
        ("use_prompt", False),
        ("skill", False),
    ],
)
def test_auto_approve_metadata_follows_the_summary_table(tool, auto_approve):
    assert build_registry().definition(tool).is_auto_approve is auto_approve


def test_tools_holds_every_definition_whether_or_not_it_has_a_handler():
    registry = build_registry({})
    assert names(registry.tools) == ALL_TOOLS
    assert registry.model_tools("interactive", "/work", None) == []


# -- session kinds, variants and notes ---------------------------------------


def test_a_coordinator_only_tool_is_stripped_from_interactive_sessions(tmp_path):
    write_schema(tmp_path, "alpha", coordinator=True)
    write_schema(tmp_path, "beta", coordinator=True, interactive=True)
    write_schema(tmp_path, "gamma")
    registry = build_registry(handlers_for("alpha", "beta", "gamma"), tmp_path)
    assert offered(registry, "interactive") == ["beta", "gamma"]
    assert offered(registry, "coordinator") == ["alpha", "beta"]


def test_a_kind_variant_can_remove_a_parameter(tmp_path):
    parameters = {
        "type": "object",
        "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
        "required": ["x", "y"],
    }
    variant = {"task": {"parameters": {"properties": {"y": None}}}}
    write_schema(tmp_path, "alpha", parameters=parameters, task_agent=True, kind_variants=variant)
    registry = build_registry(handlers_for("alpha"), tmp_path)
    (task,) = registry.model_tools("task", "/work", None)
    (interactive,) = registry.model_tools("interactive", "/work", None)
    assert task["function"]["parameters"]["properties"] == {"x": {"type": "string"}}
    assert task["function"]["parameters"]["required"] == ["x"]
    assert interactive["function"]["parameters"]["required"] == ["x", "y"]


def test_notes_are_appended_to_a_kind_variant_description_too(tmp_path):
    variant = {"task": {"description": "Task wording."}}
    write_schema(tmp_path, "alpha", task_agent=True, kind_variants=variant, cwd_note="Cwd {working_dir}.")
    (tool,) = build_registry(handlers_for("alpha"), tmp_path).model_tools("task", "/srv/w", None)
    assert tool["function"]["description"] == "Task wording. Cwd /srv/w."


def test_a_model_schema_is_made_once_and_refuses_changes_at_every_depth():
    registry = build_registry(handlers_for("memory"))
    (first,) = registry.model_tools("coordinator", "/work", None)
    (second,) = registry.model_tools("coordinator", "/work", None)
    assert second is first  # every step sends the same one
    parameters = first["function"]["parameters"]
    changes = [
        lambda: first.update(type="x"),
        lambda: first["function"].pop("name"),
        lambda: parameters["properties"].clear(),
        lambda: parameters["properties"]["scope"].__setitem__("type", "integer"),
        lambda: parameters["required"].append("scope"),
    ]
    for change in changes:
        with pytest.raises(TypeError):
            change()
    assert "scope" in registry.definition("memory").parameters["properties"]
    mine = copy.deepcopy(first)  # a copy is the caller's to change
    mine["function"]["parameters"]["properties"].clear()
    assert type(mine["function"]["parameters"]["properties"]) is dict
    assert "scope" in first["function"]["parameters"]["properties"]
    assert json.loads(json.dumps(first)) == copy.deepcopy(first)  # sent as the plain JSON it is


def test_a_schema_naming_the_working_directory_is_made_per_directory(tmp_path):
    write_schema(tmp_path, "alpha", cwd_note="Cwd {working_dir}.")
    registry = build_registry(handlers_for("alpha"), tmp_path)
    (a,) = registry.model_tools("interactive", "/srv/a", None)
    (b,) = registry.model_tools("interactive", "/srv/b", None)
    assert a["function"]["description"].endswith("Cwd /srv/a.")
    assert b["function"]["description"].endswith("Cwd /srv/b.")
    assert registry.model_tools("interactive", "/srv/a", None)[0] is a


# -- malformed schema files ----------------------------------------------------


def test_a_required_parameter_that_is_not_declared_is_refused(tmp_path):
    parameters = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x", "z"]}
    write_schema(tmp_path, "alpha", parameters=parameters)
    with pytest.raises(RegistryError, match="required parameter.*not declared: z"):
        build_registry({}, tmp_path)


def test_a_primary_key_that_is_not_a_string_parameter_is_refused(tmp_path):
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
    write_schema(tmp_path, "alpha", parameters=parameters, primary_key="n")
    with pytest.raises(RegistryError, match="must be a string parameter"):
        build_registry({}, tmp_path)


def test_a_primary_key_that_is_not_a_name_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", primary_key=["x"])
    with pytest.raises(RegistryError, match="is not a parameter"):
        build_registry({}, tmp_path)


def test_a_note_that_is_not_a_string_is_refused(tmp_path):
    write_schema(tmp_path, "alpha", workspace_note=["{workspace_dir}"])
    with pytest.raises(RegistryError, match="'workspace_note' must be a string"):
        build_registry({}, tmp_path)


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_every_schema_file_states_its_summary_table_metadata(tool):
    data = json.loads((SCHEMA_DIR / f"{tool}.json").read_text())
    assert isinstance(data["task_agent"], bool) and isinstance(data["auto_approve"], bool)
    assert isinstance(data["primary_key"], str)


@pytest.mark.parametrize(
    "tool", ["bash", "read_file", "write_file", "edit_file", "diff_file", "search", "watch", "open_preview"]
)
def test_tools_that_take_paths_or_commands_say_where_they_run(tool):
    (schema,) = build_registry(handlers_for(tool)).model_tools("interactive", "/srv/project", None)
    assert "/srv/project" in schema["function"]["description"]


def test_a_parameter_a_kind_variant_removed_is_an_unknown_argument_for_that_kind(tmp_path):
    parameters = {
        "type": "object",
        "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
        "additionalProperties": False,
    }
    variant = {"task": {"parameters": {"properties": {"y": None}}}}
    write_schema(tmp_path, "alpha", parameters=parameters, task_agent=True, kind_variants=variant)
    alpha = build_registry(handlers_for("alpha"), tmp_path).definition("alpha")
    assert alpha.unknown_arguments({"x": "1", "y": "2"}, "task") == ["y"]
    assert alpha.unknown_arguments({"x": "1", "y": "2"}, "interactive") == []


def test_a_schema_that_allows_other_arguments_has_no_unknown_ones(tmp_path):
    parameters = {"type": "object", "properties": {"x": {"type": "string"}}}
    write_schema(tmp_path, "alpha", parameters=parameters)
    alpha = build_registry(handlers_for("alpha"), tmp_path).definition("alpha")
    assert alpha.unknown_arguments({"x": "1", "z": 2}, "interactive") == []
