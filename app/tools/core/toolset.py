"""The tools one model step sees: the kind's built-ins, each tool source's catalog, and
(while tool search is on) which source tools are deferred and which expanded.

A `ToolSource` is anything that finds tools while the service runs (an MCP
server manager; a test's fake). It hands out `Catalog`s, each with a version; the
version a step saw is stored with every call it makes, so that a tool batch on
another worker resolves the same tool, or says plainly that it is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.tools import tool_search
from app.tools.core import tool_search_plan
from app.tools.core.base import ToolContext
from app.tools.core.tool import TASK, Tool, check_runtime_definition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Catalog:
    """A source's tools as of one version."""

    version: str
    tools: tuple[Tool, ...] = ()


class ToolSource(Protocol):
    """Tools found at runtime. `catalog()` is the current list; `catalog_at(version)` the
    list as it was at that version, or None when the source no longer knows it."""

    name: str

    def catalog(self) -> Catalog: ...

    def catalog_at(self, version: str) -> Catalog | None: ...


class BuiltinLookup(Protocol):
    builtin_tool_names: frozenset[str]

    def offered(self, kind: str) -> list[Tool]: ...

    def tool(self, name: str, kind: str) -> Tool | None: ...


@dataclass
class ToolSet:
    """What one model step offers: `visible` tools go to the model; `deferred` ones exist
    but wait for tool search. `tier` is the workstream's tool search tier while it is
    active (None: every tool is visible). In the native tiers the deferred tools go to
    the provider too, marked `defer_loading`, and a call to one is taken (the provider's
    search found it); in the client tier a call to one is refused until `tool_search`
    has brought it into view."""

    kind: str
    visible: list[Tool] = field(default_factory=list)
    deferred: list[Tool] = field(default_factory=list)
    tier: str | None = None

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.visible}
        self._native = self.tier in tool_search_plan.NATIVE_TIERS
        self._deferred = {t.name: t for t in self.deferred}

    def tool(self, name: str, kind: str | None = None) -> Tool | None:
        found = self._by_name.get(name)
        if found is None and self._native:
            return self._deferred.get(name)
        return found

    def is_deferred(self, name: str) -> bool:
        return name in self._deferred

    def offered_names(self, kind: str | None = None) -> list[str]:
        return [t.name for t in self.visible]

    def schemas(self, working_dir: str, workspace_dir: str | None) -> list[dict[str, Any]]:
        shown = [t.schema(self.kind, working_dir, workspace_dir) for t in self.visible]
        if not self._native:
            return shown
        hidden = [t.schema(self.kind, working_dir, workspace_dir) for t in self.deferred]
        return shown + [{**schema, "defer_loading": True} for schema in hidden]

    def counts(self) -> dict[str, int]:
        """Tools the model sees now and tools it could have (tool_search itself not counted)."""
        visible = sum(1 for t in self.visible if t.source != tool_search.SOURCE)
        return {"visible": visible, "total": visible + len(self.deferred)}


def build(
    builtins: BuiltinLookup,
    sources: Sequence[ToolSource],
    kind: str,
    expanded: Iterable[str] = (),
    search: tool_search_plan.SearchPlan | None = None,
) -> ToolSet:
    """The tool set of a workstream of `kind` whose tool search has expanded `expanded`.

    With `search` active for this many tools, the built-ins stay visible and every tool
    from a source is deferred unless expanded (in the client tier `tool_search` joins
    the visible ones while something is deferred). A built-in that a source brings (MCP's
    `read_resource` and `use_prompt`, offered while a server has resources or prompts) is a
    built-in all the same: it stays visible. A source tool that clashes with a
    built-in or an earlier source's tool, or whose definition a model would reject, is
    left out with a warning.
    A task sub-agent gets every source tool, in view: it has no tool search.
    """
    builtin = list(builtins.offered(kind))
    found: list[Tool] = []
    taken = {t.name for t in builtin}
    in_view: set[str] = set()  # tools of a source that is never searched (a client's own)
    for source in sources:
        for tool in _catalog(source).tools:
            if kind != TASK and not tool.definition.is_for_kind(kind):
                continue
            if problem := _refusal(tool, taken):
                log.warning("tool source %s: %s; not offered", source.name, problem)
                continue
            taken.add(tool.name)
            found.append(tool)
            if getattr(source, "always_in_view", False):
                in_view.add(tool.name)
    if search is None or not search.is_active(kind, len(builtin) + len(found)):
        return ToolSet(kind, builtin + found)
    shown = set(expanded) | builtins.builtin_tool_names | in_view
    deferred = [t for t in found if t.name not in shown]
    visible = builtin + [t for t in found if t.name in shown]
    if deferred and search.tier == tool_search_plan.CLIENT:
        visible.append(tool_search.tool(_finder(builtins, sources)))
    return ToolSet(kind, visible, deferred, search.tier)


def resolve(
    builtins: BuiltinLookup, sources: Sequence[ToolSource], name: str, kind: str, catalog_version: str | None
) -> Tool | str:
    """The tool a stored call names, as the model saw it; or why it cannot be had any more."""
    if catalog_version is None:
        return builtins.tool(name, kind) or f"Error: tool {name} is not available to this workstream"
    source_name, _, version = catalog_version.partition(":")
    if source_name == tool_search.SOURCE and name == tool_search.NAME:
        return tool_search.tool(_finder(builtins, sources))
    source = next((s for s in sources if s.name == source_name), None)
    if source is None:
        return f"Error: tool {name} is gone: its source {source_name!r} is no longer configured"
    catalog = source.catalog_at(version) or _catalog(source)
    tool = next((t for t in catalog.tools if t.name == name), None)
    if tool is None:
        return (
            f"Error: tool {name} is gone: {source_name} no longer offers it "
            "(its tool list changed after this call was made)"
        )
    return tool


def plan_for(ctx: ToolContext) -> tool_search_plan.SearchPlan:
    """The tool search plan of the workstream a call belongs to."""
    override = ctx.workstream.tool_search if ctx.workstream is not None else None
    return tool_search_plan.plan(ctx.settings, override, ctx.model)


def _finder(builtins: BuiltinLookup, sources: Sequence[ToolSource]) -> tool_search.Finder:
    """How `tool_search` finds the deferred tools when it runs: the workstream's tool set
    as of then (its sources' current lists, what it has expanded so far)."""

    def find(ctx: ToolContext) -> tuple[Sequence[Tool], int]:
        plan = plan_for(ctx)
        expanded = ctx.workstream.expanded_tools if ctx.workstream is not None else []
        return build(builtins, sources, ctx.kind, expanded, plan).deferred, plan.max_results

    return find


def _catalog(source: ToolSource) -> Catalog:
    try:
        return source.catalog()
    except Exception:  # a broken source costs its own tools, never the step
        log.exception("tool source %s failed to list its tools", source.name)
        return Catalog(version="unavailable")


def _refusal(tool: Tool, taken: set[str]) -> str | None:
    if tool.name in taken:
        return f"tool {tool.name} clashes with a tool of the same name"
    return check_runtime_definition(tool.definition)
