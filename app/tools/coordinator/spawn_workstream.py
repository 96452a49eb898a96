"""spawn_workstream: start one child workstream on a prompt (its own model, skill and folder)."""

from __future__ import annotations

from typing import Any

from app.coordination.children import FOLDERS, OWN_FOLDER
from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "spawn_workstream"


def child_spec(args: dict[str, Any]) -> dict[str, Any]:
    """One child's prompt, name, model, skill and folder, checked (spawn_batch's items too)."""
    if not isinstance(args, dict):
        raise arguments.ArgumentError("each workstream must be an object with a 'prompt'")
    spec = {
        "prompt": arguments.text(args, "prompt", arguments.MAX_PROMPT_CHARS, required=True),
        "name": arguments.name(args),
        "model": arguments.name(args, "model"),
        "skill": arguments.name(args, "skill"),
        "folder": arguments.choice(args, "folder", FOLDERS, OWN_FOLDER),
    }
    return {k: v for k, v in spec.items() if v is not None}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(TOOL, args, child_spec, needs_approval=False, subject=lambda a: a["prompt"])


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    return arguments.run(TOOL, ctx, lambda c: c.spawn(args))
