"""The write_file tool: write a whole file (or append to one), creating parent folders.

The approval preview shows what will change, and warns when an existing file
that was never read in this workstream is about to be replaced unseen.
"""

from __future__ import annotations

import os
from typing import Any

from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.redaction import redact_output
from app.tools.core.truncation import truncate
from app.tools.files import reach
from app.tools.files.diffs import unified_diff
from app.tools.files.paths import (
    ENCODING,
    ROUND_TRIP,
    FileToolError,
    append_text,
    check_target,
    check_text,
    has_read,
    is_binary,
    mark_read,
    path_argument,
    save_text,
)

TOOL = "write_file"
MODES = ("overwrite", "append")


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        path = path_argument(args, "path", TOOL)
        assert path is not None
        content = args.get("content")
        if not isinstance(content, str):
            raise FileToolError("Error: write_file needs a 'content' string (it may be empty)")
        check_text(content, "content", TOOL)
        mode = args.get("mode") or "overwrite"
        if mode not in MODES:
            raise FileToolError(f"Error: 'mode' must be 'overwrite' or 'append', not {mode!r}")
        resolved = reach.check(path, ctx, reach.WRITE)
        check_target(resolved, path)
        preview = _preview(path, resolved, content, mode, ctx)
    except FileToolError as exc:
        return Preparation(dict(args), TOOL, needs_approval=False, error=str(exc))
    clean = {"path": path, "content": content, "mode": mode}
    preview = truncate(redact_output(preview, ctx), ctx.settings.truncation)
    return Preparation(clean, f"{TOOL} {path} ({mode})", preview, needs_approval=True)


def _preview(path: str, resolved: str, content: str, mode: str, ctx: ToolContext) -> str:
    if not os.path.exists(resolved):
        return f"Creates {path} ({_size(content)}):\n{content}"
    # Opened as a write would be: a file with other hard links is refused now, not once approved.
    with os.fdopen(reach.open_file(resolved, path, ctx, reach.WRITE), "rb") as file:
        if mode == "append":
            return f"Appends {_size(content)} to the end of {path}:\n{content}"
        data = file.read()
    warning = ""
    if not has_read(ctx, resolved):
        warning = (
            f"WARNING: {path} already exists and has not been read in this workstream; "
            "its current content will be replaced unseen.\n"
        )
    if is_binary(data):
        return f"{warning}Replaces a binary file of {len(data):,} bytes with {_size(content)}:\n{content}"
    diff = unified_diff(data.decode(ENCODING, ROUND_TRIP), content, path, path, limit=ctx.settings.truncation)
    return f"{warning}Replaces {path} ({_size(content)}):\n" + (diff or "(no change to its content)")


def _size(content: str) -> str:
    lines = content.count("\n") + (not content.endswith("\n") and content != "")
    return f"{lines:,} line{'s' * (lines != 1)}, {len(content.encode(ENCODING, ROUND_TRIP)):,} bytes"


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    path, content, mode = args["path"], args["content"], args.get("mode", "overwrite")
    try:
        resolved = reach.check(path, ctx, reach.WRITE)  # again: a link may have moved since prepare
        check_target(resolved, path)
        existed = os.path.exists(resolved)
        size = _write(resolved, path, content, mode, ctx)
    except FileToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except OSError as exc:  # a parent that is a file, no permission, a full disk
        return ToolOutcome(f"Error: could not write {path}: {exc.strerror or exc}", is_error=True)
    mark_read(ctx, resolved)
    if mode == "append":
        return ToolOutcome(f"Appended {size:,} bytes to {path}")
    return ToolOutcome(f"Wrote {size:,} bytes to {path}" + ("" if existed else " (new file)"))


def _write(resolved: str, path: str, content: str, mode: str, ctx: ToolContext) -> int:
    """Write (or append) `content`, creating parent folders; the number of bytes written.

    Everything happens through the descriptor of the checked folder, so a link swapped in on
    the way since the check cannot take the write out of the workstream's folder."""
    folder, name = os.path.split(resolved)
    fd = reach.open_folder(folder, path, ctx)
    try:
        if mode == "append":
            append_text(fd, name, content, path)
        else:
            reach.check_replaceable(fd, name, path)
            save_text(fd, name, content)
    finally:
        os.close(fd)
    return len(content.encode(ENCODING, ROUND_TRIP))
