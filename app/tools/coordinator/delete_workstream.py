"""delete_workstream: delete a child that is at rest, with its conversation and folder's records."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "delete_workstream"


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    return {"ws_id": arguments.ws_id(args)}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, _checked, needs_approval=True)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.delete(args["ws_id"]))
