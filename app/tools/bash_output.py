"""bash_output: what a background shell printed since the last read (a filter keeps the lines a
regular expression matches), and where it stands (app/tools/commands/background.py)."""

from __future__ import annotations

import re
from typing import Any

from app.tools.commands import background
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.truncation import truncate

TOOL = "bash_output"
MAX_FILTER_CHARS = 500


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    shell_id = background.shell_id_of(args)
    if shell_id is None:
        return Preparation(
            dict(args), TOOL, needs_approval=False, error="Error: bash_output needs 'shell_id'"
        )
    clean: dict[str, Any] = {"shell_id": shell_id}
    pattern = args.get("filter")
    if pattern not in (None, ""):
        if not isinstance(pattern, str) or len(pattern) > MAX_FILTER_CHARS:
            return Preparation(
                clean,
                TOOL,
                needs_approval=False,
                error=f"Error: 'filter' must be a regular expression, at most {MAX_FILTER_CHARS} characters",
            )
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            return Preparation(
                clean, TOOL, needs_approval=False, error=f"Error: 'filter' is not a regular expression: {exc}"
            )
        clean["filter"] = pattern
    header = f"{TOOL} {shell_id}" + (f" /{pattern}/" if clean.get("filter") else "")
    return Preparation(clean, header, needs_approval=False)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome("Error: bash_output needs the service's database (none here)", True)
    try:
        row, text = background.read_new(ctx.db, ctx.ws_id, args["shell_id"])
    except background.ShellError as exc:
        return ToolOutcome(str(exc), True)
    if "filter" in args:
        matcher = re.compile(args["filter"])
        text = "".join(line for line in text.splitlines(keepends=True) if matcher.search(line))
    return ToolOutcome(truncate(_status(row) + (text or "(no new output)"), ctx.settings.truncation))


def _status(row: Any) -> str:
    said = f"[shell {row.id}: {row.status}"
    if row.exit_code is not None:
        said += f", exit code {row.exit_code}"
    if row.note:
        said += f": {row.note}"
    if row.dropped_chars:
        said += f"; {row.dropped_chars:,} characters past the stored limit were not kept"
    return said + "]\n"
