"""send_to_workstream: a follow-up message to a child (queued behind its running turn, if any)."""

from __future__ import annotations

from typing import Any

from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "send_to_workstream"


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "ws_id": arguments.ws_id(args),
        "message": arguments.text(args, "message", arguments.MAX_PROMPT_CHARS, required=True),
    }


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, _checked, needs_approval=False)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.send(args["ws_id"], args["message"]))
