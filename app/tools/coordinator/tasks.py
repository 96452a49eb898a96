"""tasks: the coordinator's persisted task list: add an entry, update its status, list them."""

from __future__ import annotations

from typing import Any

from app.coordination.tasklist import MAX_TITLE_CHARS, STATUSES
from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "tasks"
ACTIONS = ("add", "update", "list")


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    action = arguments.choice(args, "action", ACTIONS, "list")
    checked: dict[str, Any] = {"action": action}
    child = arguments.ws_id(args, "child_ws_id", required=False)
    if child is not None:
        checked["child_ws_id"] = child
    if action == "add":
        checked["title"] = arguments.text(args, "title", MAX_TITLE_CHARS, required=True)
    if action == "update":
        task_id = args.get("task_id")
        if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 1:
            raise arguments.ArgumentError("'task_id' must be the number of an entry (update)")
        checked["task_id"] = task_id
        checked["status"] = arguments.choice(args, "status", STATUSES)
        if checked["status"] is None and child is None:
            raise arguments.ArgumentError("update needs a 'status' (or a 'child_ws_id')")
    return checked


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(
        TOOL, args, _checked, needs_approval=False, subject=lambda a: f"{a['action']} {a.get('title', '')}"
    )


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.tasks(args["action"], args))
