"""wait_for_workstream: wait until the children named have ended their turns (all, or any), or a
timeout. The call waits without a worker (app/coordination/waits.py finishes it)."""

from __future__ import annotations

import json
from typing import Any

from app.coordination.waits import ALL, MODES
from app.errors import ServiceError
from app.tools.coordinator import arguments
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "wait_for_workstream"
MAX_IDS = 50
DEFAULT_TIMEOUT = 600
MAX_TIMEOUT = 86_400


def _checked(args: dict[str, Any]) -> dict[str, Any]:
    ids = args.get("ws_ids")
    if isinstance(args.get("ws_id"), str) and ids is None:
        ids = [args["ws_id"]]
    if ids is None:
        ids = []  # every open child
    if not isinstance(ids, list) or len(ids) > MAX_IDS:
        raise arguments.ArgumentError(f"'ws_ids' must be a list of at most {MAX_IDS} workstream ids")
    checked = [arguments.ws_id({"ws_id": i}) for i in ids]
    timeout = args.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= MAX_TIMEOUT:
        raise arguments.ArgumentError(f"'timeout' must be a whole number of seconds from 1 to {MAX_TIMEOUT}")
    return {
        "ws_ids": list(dict.fromkeys(checked)),
        "mode": arguments.choice(args, "mode", MODES, ALL),
        "timeout": timeout,
    }


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    return arguments.prepared(
        TOOL,
        args,
        _checked,
        needs_approval=False,
        subject=lambda a: f"{a['mode']} of {', '.join(a['ws_ids']) or 'every open child'}",
    )


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.coordination is None:
        return arguments.run(TOOL, ctx, lambda c: {})
    try:
        now = ctx.coordination.wait_check(args["ws_ids"], args["mode"])
    except ServiceError as exc:
        return ToolOutcome(f"Error: {exc.message}", is_error=True)
    if now["done"]:
        return ToolOutcome(json.dumps(now, indent=1, ensure_ascii=False))
    return ToolOutcome("", waiting_on=f"workstreams {' '.join(args['ws_ids']) or '(every open child)'}")
