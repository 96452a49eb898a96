"""list_workstreams: the coordinator's children and where each stands."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "list_workstreams"
WHICH = ("open", "all")


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    return {"which": arguments.choice(args, "which", WHICH, "open")}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, _checked, needs_approval=False, subject=lambda a: a["which"])


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.listing(with_closed=args["which"] == "all"))
