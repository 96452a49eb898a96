"""list_nodes: the live workers (their presence entries), which run every workstream's steps."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "list_nodes"


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    found = arguments.text(args, "name", 200)
    return {"name": found} if found else {}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, _checked, needs_approval=False, subject=lambda a: a.get("name", ""))


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    def nodes(c: Any) -> dict[str, Any]:
        found = c.nodes()
        if "name" in args:
            found["nodes"] = [n for n in found["nodes"] if args["name"] in n["name"]]
            found["count"] = len(found["nodes"])
        return found

    return arguments.run(TOOL, ctx, nodes)
