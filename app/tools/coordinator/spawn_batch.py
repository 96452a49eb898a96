"""spawn_batch: start several child workstreams at once, each with its own prompt and settings."""

from __future__ import annotations

from typing import Any

from app.errors import ServiceError
from app.tools.coordinator import arguments
from app.tools.coordinator.spawn_workstream import child_spec
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "spawn_batch"
MAX_BATCH = 10


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    items = args.get("workstreams")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BATCH:
        raise arguments.ArgumentError(f"'workstreams' must be a list of 1 to {MAX_BATCH} objects")
    context = arguments.text(args, "context", arguments.MAX_PROMPT_CHARS)
    specs = [child_spec(item) for item in items]
    if context:
        specs = [{**spec, "prompt": f"{context}\n\n{spec['prompt']}"} for spec in specs]
        for spec in specs:
            arguments.text(spec, "prompt", arguments.MAX_PROMPT_CHARS, required=True)
    return {"workstreams": specs}


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(
        TOOL, args, _checked, needs_approval=False, subject=lambda a: f"{len(a['workstreams'])} workstreams"
    )


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    def spawn_each(c: Any) -> dict[str, Any]:
        started, refused = [], []
        for i, spec in enumerate(args["workstreams"]):
            try:
                started.append(c.spawn(spec))
            except ServiceError as exc:  # one refused (an unknown model, say) stops none of the others
                refused.append({"index": i, "error": exc.message})
        return {"started": started, "refused": refused}

    return arguments.run(TOOL, ctx, spawn_each)
