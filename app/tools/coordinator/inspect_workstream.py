"""inspect_workstream: a child's state, its last answer and its calls awaiting approval."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "inspect_workstream"


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    return {"ws_id": arguments.ws_id(args)}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, _checked, needs_approval=False)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.inspect(args["ws_id"]))
