"""A tool source for tests: an MCP-like provider whose tools are listed in a JSON file.

Configured as `[tool_sources.NAME] factory = "tests.fakes.tool_source:create"` with
`path = "<file>"`. The file holds a list of tool specs:

    {"name": ..., "description": ..., "parameters": {...},   # the definition
     "approval": true,      # prepare asks a person (default true)
     "waits": false,        # execute ends `waiting`; the test finishes the call
     "breaks": false}       # execute returns what no handler may (an engine-path failure)

Each version of the file is kept beside it (`<file>.versions/<version>.json`), as a
real source keeps its catalog history somewhere every worker reaches; a test that
removes that folder makes the source forget its old versions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.tool import Tool, ToolDefinition
from app.tools.core.toolset import Catalog


class FileToolSource:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self.versions = path.with_name(path.name + ".versions")

    def catalog(self) -> Catalog:
        text = self.path.read_text() if self.path.exists() else "[]"
        version = hashlib.sha256(text.encode()).hexdigest()[:12]
        self.versions.mkdir(exist_ok=True)
        (self.versions / f"{version}.json").write_text(text)
        return self._catalog(version, text)

    def catalog_at(self, version: str) -> Catalog | None:
        kept = self.versions / f"{version}.json"
        return self._catalog(version, kept.read_text()) if kept.exists() else None

    def _catalog(self, version: str, text: str) -> Catalog:
        return Catalog(version, tuple(self._tool(spec, version) for spec in json.loads(text)))

    def _tool(self, spec: dict[str, Any], version: str) -> Tool:
        definition = ToolDefinition(
            spec["name"],
            spec.get("description", "A tool for tests."),
            spec.get("parameters", {"type": "object", "properties": {}}),
        )
        return Tool(definition, _Handler(spec, version), source=self.name, version=version)


class _Handler:
    def __init__(self, spec: dict[str, Any], version: str) -> None:
        self.spec = spec
        self.version = version

    def prepare(self, args: dict[str, Any], ctx: ToolContext) -> Preparation:
        return Preparation(
            args,
            header=f"{self.spec['name']} {json.dumps(args)}",
            needs_approval=self.spec.get("approval", True),
        )

    def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        if self.spec.get("waits"):
            return ToolOutcome("", waiting_on=f"test signal for {ctx.call_id}")
        if self.spec.get("breaks"):
            return ToolOutcome(object())  # type: ignore[arg-type]
        return ToolOutcome(
            f"{self.spec['name']} (catalog {self.version}) ran with {json.dumps(args, sort_keys=True)}"
        )


class FakeTools:
    """The test's side: what the source lists, written to its file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, *specs: dict[str, Any]) -> None:
        self.path.write_text(json.dumps(list(specs)))

    def forget_versions(self) -> None:
        shutil.rmtree(self.path.with_name(self.path.name + ".versions"), ignore_errors=True)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self.forget_versions()


def create(name: str, options: dict[str, Any]) -> FileToolSource:
    return FileToolSource(name, Path(options["path"]))
