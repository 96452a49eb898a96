"""The tools one model step sees: the kind's built-ins, each tool source's catalog, the expanded set.

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

from app.tools.tool import TASK, Tool, check_runtime_definition

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
    def offered(self, kind: str) -> list[Tool]: ...

    def tool(self, name: str, kind: str) -> Tool | None: ...


@dataclass
class ToolSet:
    """What one model step offers: `visible` tools go to the model; `deferred` ones exist
    (a call to one is refused until tool search brings it into view)."""

    kind: str
    visible: list[Tool] = field(default_factory=list)
    deferred: list[Tool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.visible}

    def tool(self, name: str, kind: str | None = None) -> Tool | None:
        return self._by_name.get(name)

    def offered_names(self, kind: str | None = None) -> list[str]:
        return [t.name for t in self.visible]

    def schemas(self, working_dir: str, workspace_dir: str | None) -> list[dict[str, Any]]:
        return [t.schema(self.kind, working_dir, workspace_dir) for t in self.visible]


def build(
    builtins: BuiltinLookup,
    sources: Sequence[ToolSource],
    kind: str,
    expanded: Iterable[str] = (),
) -> ToolSet:
    """The tool set of a workstream of `kind` whose tool search has expanded `expanded`.

    A source tool whose definition says `defer` stays out of view unless it was
    expanded; a source tool that clashes with a built-in or an earlier source's
    tool, or whose definition a model would reject, is left out with a warning.
    A task sub-agent gets every source tool, in view: it has no tool search.
    """
    expanded = set(expanded)
    visible = list(builtins.offered(kind))
    deferred: list[Tool] = []
    taken = {t.name for t in visible}
    for source in sources:
        for tool in _catalog(source).tools:
            if kind != TASK and not tool.definition.is_for_kind(kind):
                continue
            if problem := _refusal(tool, taken):
                log.warning("tool source %s: %s; not offered", source.name, problem)
                continue
            taken.add(tool.name)
            is_deferred = (
                kind != TASK and bool(tool.definition.meta.get("defer")) and tool.name not in expanded
            )
            (deferred if is_deferred else visible).append(tool)
    return ToolSet(kind, visible, deferred)


def resolve(
    builtins: BuiltinLookup, sources: Sequence[ToolSource], name: str, kind: str, catalog_version: str | None
) -> Tool | str:
    """The tool a stored call names, as the model saw it; or why it cannot be had any more."""
    if catalog_version is None:
        return builtins.tool(name, kind) or f"Error: tool {name} is not available to this workstream"
    source_name, _, version = catalog_version.partition(":")
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
