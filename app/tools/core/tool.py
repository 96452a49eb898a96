"""A tool, whatever its origin: its definition (what the model sees), its handler, its approval policy.

Built-in tools get their definition from a schema file; tools found while the
service runs (an MCP server, a test's source) build one in code. Both travel the
same path once they are `Tool`s.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.providers.content import Shared, frozen
from app.tools.core.base import Preparation, ToolHandler

INTERACTIVE = "interactive"
COORDINATOR = "coordinator"
TASK = "task"
KINDS = (INTERACTIVE, COORDINATOR, TASK)

BUILTIN = "builtin"  # the source name of the schema-file tools
# What the OpenAI and Anthropic APIs accept as a function name.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
KEPT_SCHEMAS = 256  # a tool's schemas kept per (kind, directories); past it, made afresh


@dataclass(frozen=True)
class ToolDefinition:
    """One tool as its schema file declares it: the model-facing schema plus metadata."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    meta: Mapping[str, Any] = field(default_factory=dict)
    # What the methods below derive, made once: every model step asks for every tool's schema.
    _parameters: dict[str, dict[str, Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _schemas: dict[tuple[str, str, str | None], Shared] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def primary_key(self) -> str | None:
        """The argument a bare-string call fills; None: such a call is an error."""
        return self.meta.get("primary_key")

    @property
    def is_task_agent(self) -> bool:
        return bool(self.meta.get("task_agent"))

    @property
    def is_auto_approve(self) -> bool:
        return bool(self.meta.get("auto_approve"))

    @property
    def is_coordinator(self) -> bool:
        return bool(self.meta.get("coordinator"))

    @property
    def is_interactive(self) -> bool:
        """Offered to interactive sessions: everything but coordinator-only tools."""
        return not self.is_coordinator or bool(self.meta.get("interactive"))

    def is_for_kind(self, kind: str) -> bool:
        if kind == INTERACTIVE:
            return self.is_interactive
        if kind == COORDINATOR:
            return self.is_coordinator
        if kind == TASK:
            return self.is_task_agent
        raise ValueError(f"unknown session kind {kind!r}; expected one of {', '.join(KINDS)}")

    def to_dict(self) -> dict[str, Any]:
        """The schema file's form: schema keys and metadata together."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(dict(self.parameters)),
            **copy.deepcopy(dict(self.meta)),
        }

    def parameters_for(self, kind: str) -> dict[str, Any]:
        """The parameters schema a session of this kind sees (its variant applied). Made once per
        kind and shared by every caller: it refuses changes."""
        found = self._parameters.get(kind)
        if found is None:
            variant = self.meta.get("kind_variants", {}).get(kind, {})
            overlaid = _overlay_parameters(self.parameters, variant.get("parameters"))
            found = self._parameters[kind] = frozen(overlaid)
        return found

    def unknown_arguments(self, args: Mapping[str, Any], kind: str) -> list[str]:
        """Argument names the schema does not declare, where it forbids others."""
        parameters = self.parameters_for(kind)
        if parameters.get("additionalProperties", True) is not False:
            return []
        return sorted(set(args) - set(parameters.get("properties", {})))

    def model_schema(self, kind: str, working_dir: str, workspace_dir: str | None) -> dict:
        """The OpenAI function schema this kind of session sees; no metadata. Made once per kind
        (and directory, for the tools whose description names one) and shared: it refuses
        changes, and its JSON is made once too."""
        key = (
            kind,
            working_dir if "cwd_note" in self.meta else "",
            workspace_dir if "workspace_note" in self.meta else None,
        )
        found = self._schemas.get(key)
        if found is None:
            if len(self._schemas) >= KEPT_SCHEMAS:  # one per working directory in use, at most
                self._schemas.clear()
            found = self._schemas[key] = self._model_schema(kind, working_dir, workspace_dir)
        return found

    def _model_schema(self, kind: str, working_dir: str, workspace_dir: str | None) -> Shared:
        variant = self.meta.get("kind_variants", {}).get(kind, {})
        description = variant.get("description", self.description)
        parameters = self.parameters_for(kind)
        notes = [description]
        if "cwd_note" in self.meta:
            notes.append(self.meta["cwd_note"].replace("{working_dir}", working_dir))
        if "workspace_note" in self.meta and workspace_dir is not None:
            notes.append(self.meta["workspace_note"].replace("{workspace_dir}", workspace_dir))
        # `parameters` is frozen already (parameters_for): only the two dicts around it are new.
        function = Shared(name=self.name, description=" ".join(notes), parameters=parameters)
        return Shared(type="function", function=function)


def _overlay_parameters(base: Mapping[str, Any], overlay: Mapping[str, Any] | None) -> dict:
    """`base` with `overlay` applied: properties merged one by one (None removes
    one), any other key replaced."""
    parameters = copy.deepcopy(dict(base))
    for key, value in (overlay or {}).items():
        if key != "properties":
            parameters[key] = copy.deepcopy(value)
            continue
        properties = parameters.setdefault("properties", {})
        for prop, schema in value.items():
            if schema is None:
                properties.pop(prop, None)
                if prop in parameters.get("required", []):
                    parameters["required"] = [r for r in parameters["required"] if r != prop]
            else:
                properties[prop] = copy.deepcopy(schema)
    return parameters


@dataclass(frozen=True)
class Tool:
    """Definition + handler + approval policy; `source` and `version` say where it came from.

    `version` is the version of the source's catalog that produced this definition
    (None for built-ins): stored with each call, so that a tool batch on another
    worker resolves the tool the model saw.
    """

    definition: ToolDefinition
    handler: ToolHandler
    source: str = BUILTIN
    version: str | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def is_builtin(self) -> bool:
        return self.source == BUILTIN

    @property
    def catalog_version(self) -> str | None:
        """`source:version` as stored with a call; None for a built-in."""
        return None if self.is_builtin else f"{self.source}:{self.version or ''}"

    def needs_approval(self, prep: Preparation, kind: str) -> bool:
        # A task sub-agent skips confirmation for TASK_AUTO_TOOLS (the definition's
        # auto_approve), even where an interactive session would ask (web_fetch).
        if kind == TASK and self.definition.is_auto_approve:
            return False
        return prep.needs_approval

    def schema(self, kind: str, working_dir: str, workspace_dir: str | None) -> dict[str, Any]:
        return self.definition.model_schema(kind, working_dir, workspace_dir)


def check_runtime_definition(definition: ToolDefinition) -> str | None:
    """Why a definition found at runtime cannot be offered to a model; None when it can."""
    if not TOOL_NAME_PATTERN.match(definition.name):
        return f"tool name {definition.name[:80]!r} is not 1-64 letters, digits, '_' or '-'"
    params = definition.parameters
    # `type(...) is dict` first: this runs for every source tool at every model step, and an
    # ABC isinstance check is slow enough to count with a thousand MCP tools.
    if not (type(params) is dict or isinstance(params, Mapping)) or params.get("type") != "object":
        return f"tool {definition.name}: parameters must be a JSON schema of type object"
    properties = params.get("properties", {})
    if not (type(properties) is dict or isinstance(properties, Mapping)):
        return f"tool {definition.name}: parameters.properties must be an object"
    return None


def approval_label(func_name: str, args: dict) -> str:
    """What "always" approves: the tool, or for read_resource / use_prompt one URI / one prompt."""
    if func_name == "read_resource" and isinstance(args.get("uri"), str):
        return f"read_resource:{args['uri']}"
    if func_name == "use_prompt" and isinstance(args.get("name"), str):
        return f"use_prompt:{args['name']}"
    return func_name
