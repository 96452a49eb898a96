"""close_all_children: close every open child of the coordinator at once."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "close_all_children"


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    reason = arguments.text(args, "reason", 500)
    return {"reason": reason} if reason else {}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(
        TOOL, args, _checked, needs_approval=True, subject=lambda a: a.get("reason", "")
    )


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.close_all())
