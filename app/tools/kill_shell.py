"""kill_shell: stop a background shell and what it started (its worker does, within a moment)."""

from __future__ import annotations

import time
from typing import Any

from app.storage.models import ShellStatus
from app.tools.commands import background
from app.tools.core.base import Preparation, ToolContext, ToolOutcome

TOOL = "kill_shell"
STOP_WAIT_SECONDS = 5.0  # how long the call waits to see it stopped


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    shell_id = background.shell_id_of(args)
    if shell_id is None:
        return Preparation(dict(args), TOOL, needs_approval=False, error="Error: kill_shell needs 'shell_id'")
    return Preparation({"shell_id": shell_id}, f"{TOOL} {shell_id}", needs_approval=False)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome("Error: kill_shell needs the service's database (none here)", True)
    shell_id = args["shell_id"]
    try:
        row = background.shell(ctx.db, ctx.ws_id, shell_id)
        if row.status != ShellStatus.RUNNING:
            return ToolOutcome(f"Shell {shell_id} is not running ({row.status}).")
        background.request_stop(ctx.db, ctx.ws_id, shell_id)
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while time.monotonic() < deadline and row.status == ShellStatus.RUNNING:
            time.sleep(background.FLUSH_SECONDS / 2)
            row = background.shell(ctx.db, ctx.ws_id, shell_id)
    except background.ShellError as exc:
        return ToolOutcome(str(exc), True)
    if row.status == ShellStatus.RUNNING:
        return ToolOutcome(f"Asked shell {shell_id} to stop; it is still stopping.")
    return ToolOutcome(f"Shell {shell_id} stopped ({row.status}).")
