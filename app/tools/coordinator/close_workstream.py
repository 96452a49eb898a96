"""close_workstream: close a child: its turns stopped, no more messages; its history stays."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "close_workstream"


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    return {"ws_id": arguments.ws_id(args)}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, _checked, needs_approval=True)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.close(args["ws_id"]))
