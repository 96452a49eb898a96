"""The registry: schema files checked against handlers, and the sets derived from them."""

import json
import types

import pytest

from app.tools.base import Preparation, ToolOutcome
from app.tools.registry import SCHEMA_DIR, RegistryError, build_registry

ALL_TOOLS = {
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
    }


def test_task_auto_tools_include_web_tools_per_resolutions():
    assert build_registry().task_auto_tools == {
        "read_file",
        "diff_file",
        "search",
        "web_fetch",
        "web_search",
        "memory",
        "recall",
        "notify",
    }


def test_memory_is_the_one_dual_kind_tool():
    registry = build_registry()
    assert names(registry.coordinator_tools) == {"memory"}
    assert names(registry.interactive_tools) == ALL_TOOLS


def test_tools_keep_their_metadata():
    bash = build_registry().definition("bash")
    assert bash.meta["primary_key"] == "command"
    assert bash.to_dict()["task_agent"] is True


def test_only_tools_with_a_handler_are_offered():
    assert offered(build_registry(), "interactive") == [
        "bash",
        "diff_file",
        "edit_file",
        "read_file",
        "search",
        "write_file",
    ]


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
    assert registry.has_handler("bash") and not registry.has_handler("web_fetch")
    assert callable(registry.handler("bash").execute)
    with pytest.raises(KeyError):
        registry.handler("web_fetch")


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
