"""The diff_file tool: a unified diff of a file against a second file or against given text.

Read-only and unprompted. The files it shows count as read for edit_file's
guard from the moment the call is prepared, like read_file's.
"""

from __future__ import annotations

import os
from typing import Any

from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.redaction import redact_output
from app.tools.files import reach
from app.tools.files.diffs import unified_diff
from app.tools.files.paths import FileToolError, check_file, load_text, mark_read, path_argument

TOOL = "diff_file"
DEFAULT_CONTEXT = 3
MAX_CONTEXT = 20
CONTENT_LABEL = "content_b"  # the "+++" label when comparing with given text


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        clean = _parse(args)
        resolved = [reach.check(clean[key], ctx, reach.READ) for key in ("path_a", "path_b") if key in clean]
    except FileToolError as exc:
        return Preparation(dict(args), TOOL, needs_approval=False, error=str(exc))
    for path in resolved:
        if os.path.isfile(path):
            mark_read(ctx, path)
    other = clean.get("path_b", "the given content")
    return Preparation(clean, f"{TOOL} {clean['path_a']} vs {other}", needs_approval=False)


def _parse(args: dict[str, Any]) -> dict[str, Any]:
    path_a = path_argument(args, "path_a", TOOL)
    path_b = path_argument(args, "path_b", TOOL, required=False)
    content_b = args.get("content_b")
    if path_b is not None and content_b is not None:
        raise FileToolError("Error: give path_b or content_b, not both")
    if path_b is None and content_b is None:
        raise FileToolError("Error: diff_file needs path_b (a second file) or content_b (text to compare)")
    if content_b is not None and not isinstance(content_b, str):
        raise FileToolError("Error: 'content_b' must be a string")
    context = args.get("context_lines")
    if context is None:
        context = DEFAULT_CONTEXT
    if isinstance(context, bool) or not isinstance(context, int):
        raise FileToolError("Error: 'context_lines' must be a whole number from 0 to 20")
    clean: dict[str, Any] = {"path_a": path_a, "context_lines": min(max(context, 0), MAX_CONTEXT)}
    if path_b is not None:
        clean["path_b"] = path_b
    else:
        clean["content_b"] = content_b
    return clean


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    path_a = args["path_a"]
    try:
        text_a = _load(path_a, ctx)
        if "path_b" in args:
            label_b = args["path_b"]
            text_b = _load(label_b, ctx)
        else:
            label_b, text_b = CONTENT_LABEL, args["content_b"]
    except FileToolError as exc:
        return ToolOutcome(redact_output(str(exc), ctx), is_error=True)
    limit = ctx.settings.truncation
    diff = unified_diff(text_a, text_b, path_a, label_b, args["context_lines"], limit=limit)
    return ToolOutcome(redact_output(diff.rstrip("\n"), ctx) or "(no differences)")


def _load(path: str, ctx: ToolContext) -> str:
    resolved = reach.check(path, ctx, reach.READ)  # again: a link may have moved since prepare
    check_file(resolved, path)
    return load_text(reach.open_file(resolved, path, ctx), path)
