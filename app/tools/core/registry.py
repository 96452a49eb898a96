"""The tool registry: schema files and handler modules, checked against each other.

Built explicitly at start-up with `build_registry()`; nothing registers itself on
import. It derives the spec's tool sets from the schema files' metadata.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.settings import ToolSettings
from app.tools.core.base import ToolHandler
from app.tools.core.tool import COORDINATOR, INTERACTIVE, KINDS, TASK, Tool, ToolDefinition

SCHEMA_DIR = Path(__file__).parent.parent / "schemas"  # app/tools/schemas

__all__ = ["COORDINATOR", "INTERACTIVE", "KINDS", "TASK", "Registry", "RegistryError", "build_registry"]

SCHEMA_KEYS = frozenset({"name", "description", "parameters"})
META_KEYS = frozenset(
    {
        "task_agent",
        "coordinator",
        "interactive",
        "auto_approve",
        "primary_key",
        "kind_variants",
        "cwd_note",
        "workspace_note",
    }
)
_BOOL_META = ("task_agent", "coordinator", "interactive", "auto_approve")
_VARIANT_KEYS = frozenset({"description", "parameters"})


class RegistryError(Exception):
    """The schema files and handlers disagree, or a schema file is malformed."""


class Registry:
    """Every built-in tool definition, the handlers that exist, and the derived sets.

    The spec's names: `tools` is TOOLS, `task_agent_tools` TASK_AGENT_TOOLS,
    `task_auto_tools` TASK_AUTO_TOOLS, `builtin_tool_names` BUILTIN_TOOL_NAMES,
    `primary_key_map` PRIMARY_KEY_MAP; `interactive_tools` and
    `coordinator_tools` are the per-kind lists. All come from the schema files,
    whether or not a handler exists; `model_tools` offers only those with one, and,
    given the service's tool settings, only those whose handler says it can run
    with them (`is_available(settings)`, e.g. web_search without a backend).
    """

    def __init__(
        self,
        definitions: list[ToolDefinition],
        handlers: Mapping[str, ToolHandler],
        settings: ToolSettings | None = None,
    ):
        self.tools = definitions
        self._by_name = {d.name: d for d in definitions}
        self._handlers = dict(handlers)
        self._unavailable = frozenset(
            name for name, handler in self._handlers.items() if not _is_available(handler, settings)
        )
        self.builtin_tool_names = frozenset(self._by_name)
        self.primary_key_map = {d.name: d.primary_key for d in definitions}
        self.task_auto_tools = {d.name for d in definitions if d.is_auto_approve}
        self.task_agent_tools = [d for d in definitions if d.is_task_agent]
        self.interactive_tools = [d for d in definitions if d.is_interactive]
        self.coordinator_tools = [d for d in definitions if d.is_coordinator]
        self._tools = {
            d.name: Tool(d, self._handlers[d.name]) for d in definitions if d.name in self._handlers
        }

    def tool(self, name: str, kind: str) -> Tool | None:
        """The built-in tool a session of this kind may call by that name."""
        return self._tools.get(name) if self.is_offered(name, kind) else None

    def offered(self, kind: str) -> list[Tool]:
        """The built-in tools a session of `kind` is offered, in schema-file order."""
        if kind not in KINDS:
            raise ValueError(f"unknown session kind {kind!r}; expected one of {', '.join(KINDS)}")
        return [self._tools[d.name] for d in self.tools if self.is_offered(d.name, kind)]

    def definition(self, name: str) -> ToolDefinition | None:
        return self._by_name.get(name)

    def has_handler(self, name: str) -> bool:
        return name in self._handlers

    def handler(self, name: str) -> ToolHandler:
        try:
            return self._handlers[name]
        except KeyError:
            raise KeyError(f"no handler for tool {name!r}") from None

    def is_offered(self, name: str, kind: str) -> bool:
        """Whether a session of this kind is offered the tool (and so may call it)."""
        definition = self._by_name.get(name)
        return (
            definition is not None
            and self.has_handler(name)
            and name not in self._unavailable
            and definition.is_for_kind(kind)
        )

    def offered_names(self, kind: str) -> list[str]:
        return [d.name for d in self.tools if self.is_offered(d.name, kind)]

    def model_tools(self, kind: str, working_dir: str, workspace_dir: str | None) -> list[dict]:
        """The tool list for a model in a session of `kind`: only tools with a handler."""
        return [t.schema(kind, working_dir, workspace_dir) for t in self.offered(kind)]


def default_handlers() -> dict[str, ToolHandler]:
    from app.tools import (
        bash,
        bash_output,
        diff_file,
        edit_file,
        kill_shell,
        memory,
        notify,
        open_preview,
        read_file,
        recall,
        search,
        skill,
        task_agent,
        watch,
        web_fetch,
        web_search,
        write_file,
    )

    modules: tuple[Any, ...] = (
        bash,
        read_file,
        write_file,
        edit_file,
        diff_file,
        search,
        web_fetch,
        web_search,
        open_preview,
        task_agent,
        watch,
        memory,
        recall,
        skill,
        notify,
        bash_output,
        kill_shell,
        *coordinator_handlers(),
    )
    return {module.__name__.rpartition(".")[2]: module for module in modules}


def coordinator_handlers() -> tuple[Any, ...]:
    """The coordinator kind's tools (app/tools/coordinator)."""
    from app.tools.coordinator import (
        cancel_workstream,
        close_all_children,
        close_workstream,
        delete_workstream,
        inspect_workstream,
        list_nodes,
        list_workstreams,
        send_to_workstream,
        spawn_batch,
        spawn_workstream,
        tasks,
        wait_for_workstream,
    )

    return (
        spawn_workstream,
        spawn_batch,
        wait_for_workstream,
        inspect_workstream,
        send_to_workstream,
        cancel_workstream,
        close_workstream,
        delete_workstream,
        list_workstreams,
        list_nodes,
        tasks,
        close_all_children,
    )


def build_registry(
    handlers: Mapping[str, ToolHandler] | None = None,
    schema_dir: Path | None = None,
    settings: ToolSettings | None = None,
) -> Registry:
    """Load every schema file and pair it with its handler; `RegistryError` on any clash.

    With `settings` (the service's `[tools]`), a handler that cannot run with them is
    not offered; without, every handler is (a registry built to list or test tools).
    """
    handlers = default_handlers() if handlers is None else handlers
    definitions = load_definitions(SCHEMA_DIR if schema_dir is None else schema_dir)
    names = {d.name for d in definitions}
    orphans = sorted(set(handlers) - names)
    if orphans:
        raise RegistryError(f"handler(s) with no schema file: {', '.join(orphans)}")
    for name, handler in handlers.items():
        if not (callable(getattr(handler, "prepare", None)) and callable(getattr(handler, "execute", None))):
            raise RegistryError(f"handler for {name!r} lacks prepare() or execute()")
    return Registry(definitions, handlers, settings)


def _is_available(handler: ToolHandler, settings: ToolSettings | None) -> bool:
    """A handler may define `is_available(settings) -> bool`; one that does not is always available."""
    check = getattr(handler, "is_available", None)
    return settings is None or check is None or bool(check(settings))


def load_definitions(schema_dir: Path) -> list[ToolDefinition]:
    paths = sorted(Path(schema_dir).glob("*.json"))
    if not paths:
        raise RegistryError(f"{schema_dir}: no tool schema files")
    loaded = [(path, _read_schema(path)) for path in paths]
    owners: dict[Any, str] = {}
    for path, data in loaded:
        name = data.get("name")
        if isinstance(name, str) and name in owners:
            raise RegistryError(f"duplicate tool name {name!r} in {owners[name]} and {path.name}")
        owners[name] = path.name
    definitions = []
    for path, data in loaded:
        _check_definition(path, data)
        meta = {k: v for k, v in data.items() if k in META_KEYS}
        definitions.append(ToolDefinition(data["name"], data["description"], data["parameters"], meta))
    return definitions


def _read_schema(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RegistryError(f"{path.name}: cannot load: {exc}") from exc
    if not isinstance(data, dict):
        raise RegistryError(f"{path.name}: a tool schema must be a JSON object")
    return data


def _check_definition(path: Path, data: dict[str, Any]) -> None:
    where = path.name
    unknown = sorted(set(data) - SCHEMA_KEYS - META_KEYS)
    if unknown:
        raise RegistryError(f"{where}: unknown key(s) {', '.join(unknown)}")
    name = data.get("name")
    if name != path.stem:
        raise RegistryError(f"{where}: name {name!r} does not match the file name")
    if not isinstance(data.get("description"), str) or not data["description"].strip():
        raise RegistryError(f"{where}: needs a non-empty 'description'")
    properties = _check_parameters(where, data.get("parameters"))
    _check_primary_key(where, data, properties)
    _check_flags_and_notes(where, data)
    _check_variants(where, data.get("kind_variants", {}))


def _check_parameters(where: str, parameters: Any) -> dict[str, Any]:
    """The declared properties, once the schema is an object whose required ones exist."""
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise RegistryError(f"{where}: 'parameters' must be a JSON schema of type object")
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict):
        raise RegistryError(f"{where}: 'parameters.properties' must be an object")
    missing = [str(r) for r in parameters.get("required", []) if r not in properties]
    if missing:
        raise RegistryError(f"{where}: required parameter(s) not declared: {', '.join(missing)}")
    return properties


def _check_flags_and_notes(where: str, data: dict[str, Any]) -> None:
    for key in _BOOL_META:
        if key in data and not isinstance(data[key], bool):
            raise RegistryError(f"{where}: {key!r} must be true or false")
    for key, placeholder in (("cwd_note", "{working_dir}"), ("workspace_note", "{workspace_dir}")):
        if key not in data:
            continue
        if not isinstance(data[key], str):
            raise RegistryError(f"{where}: {key!r} must be a string")
        if placeholder not in data[key]:
            raise RegistryError(f"{where}: {key!r} must contain {placeholder}")


def _check_primary_key(where: str, data: dict[str, Any], properties: dict[str, Any]) -> None:
    # Every tool has one: it is what rescues a call whose arguments are a bare string.
    if "primary_key" not in data:
        raise RegistryError(f"{where}: missing 'primary_key'")
    key = data["primary_key"]
    if not isinstance(key, str) or key not in properties:
        raise RegistryError(f"{where}: primary_key {key!r} is not a parameter")
    if not isinstance(properties[key], dict) or properties[key].get("type") != "string":
        raise RegistryError(f"{where}: primary_key {key!r} must be a string parameter")


def _check_variants(where: str, variants: Any) -> None:
    if not isinstance(variants, dict):
        raise RegistryError(f"{where}: 'kind_variants' must be an object")
    for kind, variant in variants.items():
        if kind not in KINDS:
            raise RegistryError(f"{where}: kind_variants names unknown kind {kind!r}")
        if not isinstance(variant, dict) or set(variant) - _VARIANT_KEYS:
            raise RegistryError(f"{where}: kind_variants[{kind!r}] may hold only description and parameters")
