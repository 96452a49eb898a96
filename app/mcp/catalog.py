"""The MCP catalog as the model sees it: a `ToolSource` of `mcp__{server}__{tool}` tools, and the
resource and prompt catalogs the system prompt lists.

The version is a hash of the tool definitions, so two workers that see the same servers
offer the same version, and a batch on either resolves the tool the model saw.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from app.mcp import uri_templates
from app.mcp.handler import MCPToolHandler
from app.mcp.manager import MCPManager, ServerView
from app.mcp.names import full_name, model_name
from app.mcp.states import CONNECTED
from app.tools.core.tool import Tool, ToolDefinition, check_runtime_definition
from app.tools.core.toolset import Catalog

SOURCE_NAME = "mcp"
KEPT_VERSIONS = 64  # catalogs a batch may still ask for by version
MAX_SCHEMA_CHARS = 100_000  # an inputSchema larger than this is not sent to a model


@dataclass(frozen=True)
class MCPToolDefinition(ToolDefinition):
    """An MCP tool's definition: one schema for every kind and no notes, so the schema a model
    sees is built once per catalog, not once per tool per model step (1,000 tools are common)."""

    def model_schema(self, kind: str, working_dir: str, workspace_dir: str | None) -> dict:
        return {"type": "function", "function": self._function}

    @cached_property
    def _function(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class Offer:
    """One worker's view of every server: tools, resources, prompts, and what was skipped."""

    catalog: Catalog
    resources: tuple[dict[str, Any], ...] = ()  # resources then templates, each with its server
    prompts: tuple[dict[str, Any], ...] = ()  # {name (mcp__s__p), prompt, server, description, arguments}
    warnings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class MCPToolSource:
    """A `ToolSource` over a manager; rebuilt only when the manager's generation moves."""

    name = SOURCE_NAME

    def __init__(self, manager: MCPManager, builtins: Mapping[str, ToolDefinition] | None = None) -> None:
        """`builtins`: the schema-file definitions of read_resource and use_prompt, offered
        (through this source) while some server has resources / prompts."""
        self.manager = manager
        self.builtins = dict(builtins or {})
        self._lock = threading.Lock()
        self._generation = -1
        self._offer = Offer(Catalog("empty"))
        self._history: OrderedDict[str, Catalog] = OrderedDict()
        self._cache: dict[str, Any] = {}  # per server: its converted tools (build_offer)

    def offer(self) -> Offer:
        generation = self.manager.generation
        with self._lock:
            if generation != self._generation:
                self._offer = build_offer(
                    self.manager.servers(), self.manager, self._catalog_tools, self._cache
                )
                self._generation = generation
                self._history[self._offer.catalog.version] = self._offer.catalog
                self._history.move_to_end(self._offer.catalog.version)
                while len(self._history) > KEPT_VERSIONS:
                    self._history.popitem(last=False)
            return self._offer

    def catalog(self) -> Catalog:
        return self.offer().catalog

    def resource_server(self, uri: str) -> str | None:
        """The connected server that lists `uri`, or whose template matches it."""
        resources = self.offer().resources
        exact = next((r["server"] for r in resources if r["uri"] == uri), None)
        return exact or next((r["server"] for r in resources if uri_templates.matches(r["uri"], uri)), None)

    def prompts(self) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in self.offer().prompts}

    def _catalog_tools(self, resources: bool, prompts: bool) -> list[Tool]:
        from app.tools import read_resource, use_prompt

        out = []
        if resources and "read_resource" in self.builtins:
            out.append(
                Tool(
                    self.builtins["read_resource"], read_resource.Handler(self.manager, self.resource_server)
                )
            )
        if prompts and "use_prompt" in self.builtins:
            out.append(Tool(self.builtins["use_prompt"], use_prompt.Handler(self.manager, self.prompts)))
        return out

    def catalog_at(self, version: str) -> Catalog | None:
        self.offer()
        with self._lock:
            return self._history.get(version)


def build_offer(
    servers: list[ServerView], manager: MCPManager, catalog_tools: Any = None, cache: dict | None = None
) -> Offer:
    """Everything the connected servers offer. `cache` (the source's, between builds) keeps each
    server's converted tools while its tool list is the same object, so a change of one
    server's list costs that server's tools, not all of them."""
    tools: list[Tool] = []
    resources: list[dict[str, Any]] = []
    prompts: list[dict[str, Any]] = []
    warnings: dict[str, tuple[str, ...]] = {}
    digests: list[str] = []
    taken: set[str] = set()
    cache = {} if cache is None else cache
    for view in servers:
        if view.state != CONNECTED:
            continue
        name = view.config.name
        kept = cache.get(name)
        if kept is None or kept[0] is not view.listing.tools:
            found, skipped = _tools(view, manager)
            kept = cache[name] = (view.listing.tools, found, skipped, _digest(found))
        _, found, skipped, digest = kept
        clashes = [t for t in found if t.name in taken]  # only a hash collision across servers
        skipped = [
            *skipped,
            *(f"tool {t.name} clashes with another server's; skipped" for t in clashes),
            *(f"{m}: the server answers Method not found; nothing listed" for m in view.listing.unlisted),
        ]
        tools.extend(t for t in found if t not in clashes)
        taken.update(t.name for t in found)
        warnings[name] = tuple(skipped)
        digests.append(digest)
        resources.extend(view.listing.resources)
        resources.extend(view.listing.templates)
        prompts.extend(_prompt(name, p) for p in view.listing.prompts)
    for gone in set(cache) - {v.config.name for v in servers if v.state == CONNECTED}:
        del cache[gone]
    if catalog_tools is not None:
        extra = catalog_tools(bool(resources), bool(prompts))
        tools = extra + tools
        digests.insert(0, _digest(extra))
    version = hashlib.sha256("".join(digests).encode()).hexdigest()[:12]
    versioned = tuple(Tool(t.definition, t.handler, SOURCE_NAME, version) for t in tools)
    return Offer(Catalog(version, versioned), tuple(resources), tuple(prompts), warnings)


def _tools(view: ServerView, manager: MCPManager) -> tuple[list[Tool], list[str]]:
    server = view.config.name
    out: list[Tool] = []
    skipped: list[str] = []
    taken: dict[str, str] = {}
    for mcp_tool in view.listing.tools:
        name = model_name(server, mcp_tool.name)
        if name in taken:
            skipped.append(f"tool {mcp_tool.name!r} maps to {name}, already taken by {taken[name]}; skipped")
            continue
        definition = MCPToolDefinition(
            name=name,
            description=f"[MCP: {server}] {mcp_tool.description or mcp_tool.name}",
            parameters=_parameters(mcp_tool.input_schema),
            meta={"task_agent": True, "mcp_server": server, "mcp_tool": mcp_tool.name},
        )
        if problem := _unusable(definition):
            skipped.append(f"tool {mcp_tool.name!r}: {problem}; skipped")
            continue
        taken[name] = full_name(server, mcp_tool.name)
        out.append(Tool(definition, MCPToolHandler(manager, server, mcp_tool.name), SOURCE_NAME))
    return out, skipped


def _parameters(schema: Any) -> Any:
    """The inputSchema as function calling needs it. One without a `type` (`{}`, or only
    `properties`) describes the arguments object anyway: it becomes an object schema. One of
    another type is left as it is, and refused. Sizes are said in words (`_in_words`)."""
    if isinstance(schema, dict) and "type" not in schema:
        schema = {"type": "object", "properties": {}, **schema}
    return _in_words(schema)


# Bounds a constrained decoder turns into repetitions, and the words that say them instead.
_REPEATING = {
    "maxLength": ("at most", "character"),
    "minLength": ("at least", "character"),
    "maxItems": ("at most", "item"),
    "minItems": ("at least", "item"),
    "maxProperties": ("at most", "entry"),
    "minProperties": ("at least", "entry"),
}
_MAX_SCHEMA_DEPTH = 64  # deeper than any real schema; below it a schema is left as it is
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_DATA = frozenset({"description", "title", "enum", "const", "default", "examples", "required"})


def _in_words(schema: Any, depth: int = 0) -> Any:
    """`schema` with its length and size bounds moved into the descriptions. llama.cpp turns
    every offered tool's schema into one grammar for the tool call, where such a bound becomes
    a repetition; past its cap (2,000, less for complex rules) the grammar does not parse and
    every tool call of the request fails, whichever server's tool carried it. The server still
    checks its arguments, and the model still reads the bound."""
    if depth > _MAX_SCHEMA_DEPTH or not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    said: list[str] = []
    for key, value in schema.items():
        if key in _REPEATING and isinstance(value, int) and not isinstance(value, bool):
            bound, unit = _REPEATING[key]
            plural = unit if value == 1 else ("entries" if unit == "entry" else unit + "s")
            said.append(f"{bound} {value:,} {plural}")
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):  # names, each a schema
            kept[key] = {name: _in_words(sub, depth + 1) for name, sub in value.items()}
        elif key in _DATA:
            kept[key] = value
        elif isinstance(value, list):  # allOf, anyOf, oneOf, prefixItems
            kept[key] = [_in_words(sub, depth + 1) for sub in value]
        else:  # items, additionalProperties, not, if / then / else, ...; a plain value as it is
            kept[key] = _in_words(value, depth + 1)
    if said:
        words = "; ".join(said)
        described = kept.get("description")
        kept["description"] = f"{described} ({words})" if isinstance(described, str) and described else words
    return kept


def _unusable(definition: ToolDefinition) -> str | None:
    if problem := check_runtime_definition(definition):
        return problem
    try:
        size = len(json.dumps(definition.parameters))
    except (TypeError, ValueError):
        return "inputSchema is not JSON"
    return f"inputSchema is {size} characters" if size > MAX_SCHEMA_CHARS else None


def _prompt(server: str, prompt: Any) -> dict[str, Any]:
    return {
        "name": full_name(server, prompt.name),
        "prompt": prompt.name,
        "server": server,
        "description": prompt.description or "",
        "arguments": [
            {"name": a.name, "required": bool(a.required), "description": a.description or ""}
            for a in (prompt.arguments or [])
        ],
    }


def _digest(tools: list[Tool]) -> str:
    digest = hashlib.sha256()
    for t in tools:
        d = t.definition
        digest.update(json.dumps([d.name, d.description, d.parameters], sort_keys=True).encode())
    return digest.hexdigest()
