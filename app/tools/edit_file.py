"""The edit_file tool: exact-text replacements, one, all, or an atomic batch.

Validated at prepare (so the person approving sees the diff that will be made)
and again at execute against the file as it is then: if it changed so that an
edit no longer applies, nothing is written. The file is written once.
"""

from __future__ import annotations

import os
from typing import Any

from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.redaction import redact_output
from app.tools.files import reach, replacements
from app.tools.files.diffs import unified_diff
from app.tools.files.paths import (
    FileToolError,
    check_file,
    check_text,
    has_read,
    load_text,
    path_argument,
    save_text,
)
from app.tools.files.replacements import Edit, ReplacementError

TOOL = "edit_file"
EDIT_KEYS = frozenset({"old_string", "new_string", "near_line"})


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        path, edits, every, batch = _parse(args)
        resolved = reach.check(path, ctx, reach.WRITE)
        if not has_read(ctx, resolved):
            return _refusal(args, f"Error: must read_file {path} before editing it")
        text = _load(resolved, path, ctx)
        new_text, summary = _edited(text, edits, every, batch, path)
    except (FileToolError, ReplacementError) as exc:
        return _refusal(args, redact_output(str(exc), ctx))
    preview = summary + "\n" + unified_diff(text, new_text, path, path, limit=ctx.settings.truncation)
    return Preparation(dict(args), f"{TOOL} {path}", redact_output(preview, ctx), needs_approval=True)


def _load(resolved: str, path: str, ctx: ToolContext) -> str:
    """The file's text, opened as a write would be (a file with other hard links refused)."""
    check_file(resolved, path)
    return load_text(reach.open_file(resolved, path, ctx, reach.WRITE), path)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    path, edits, every, batch = _parse(args)
    try:
        resolved = reach.check(path, ctx, reach.WRITE)  # again: a link may have moved since prepare
        text = _load(resolved, path, ctx)
    except FileToolError as exc:
        return ToolOutcome(f"{exc} (it could be edited when this edit was prepared)", is_error=True)
    try:
        new_text, summary = _edited(text, edits, every, batch, path)
    except ReplacementError as exc:
        reason = str(exc).removeprefix("Error: ")
        return ToolOutcome(
            f"Error: {path} changed after this edit was prepared, and the edit no longer applies "
            f"({redact_output(reason, ctx)}). The file was left unchanged: read it again, then redo "
            "the edit.",
            is_error=True,
        )
    try:
        _save(resolved, path, new_text, ctx)
    except FileToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except OSError as exc:  # no permission on the folder, a full disk: the file is untouched
        return ToolOutcome(f"Error: could not write {path}: {exc.strerror or exc}", is_error=True)
    return ToolOutcome(f"Edited {path}: {summary}")


def _save(resolved: str, path: str, text: str, ctx: ToolContext) -> None:
    """Replace the file through its checked folder's descriptor (see write_file)."""
    folder, name = os.path.split(resolved)
    fd = reach.open_folder(folder, path, ctx)
    try:
        reach.check_replaceable(fd, name, path)
        save_text(fd, name, text)
    finally:
        os.close(fd)


def _edited(text: str, edits: list[Edit], every: bool, batch: bool, path: str) -> tuple[str, str]:
    """The new text and a one-line summary of the change."""
    edits = _in_file_line_endings(text, edits)
    if every:
        new_text, count = replacements.replace_all(text, edits[0].old, edits[0].new, path)
        return new_text, f"replaced all {count} occurrence{'s' if count != 1 else ''} of old_string."
    spans = replacements.plan(text, edits, path, batch)
    at = ", ".join(str(s.line) for s in spans)
    if not batch:
        return replacements.apply(text, spans), f"replaced 1 occurrence at line {at}."
    plural = "s" * (len(spans) != 1)
    return replacements.apply(text, spans), f"applied {len(spans)} edit{plural} (at line{plural} {at})."


def _in_file_line_endings(text: str, edits: list[Edit]) -> list[Edit]:
    """In a file whose every line ends in CRLF, edits written with bare LFs get CRLFs.

    read_file shows lines without their `\r`, so a model copying several lines from
    it writes `\n`; matched as written, such an edit could never apply. Files with
    mixed endings, and edits that already carry a `\r`, are taken as written.
    """
    if "\r\n" not in text or text.count("\n") != text.count("\r\n"):
        return edits
    return [
        Edit(e.old.replace("\n", "\r\n"), e.new.replace("\n", "\r\n"), e.near_line)
        if "\n" in e.old + e.new and "\r" not in e.old + e.new
        else e
        for e in edits
    ]


def _parse(args: dict[str, Any]) -> tuple[str, list[Edit], bool, bool]:
    """The path, the edits, whether to replace every occurrence, and whether the edits
    came as a batch; `FileToolError` if the arguments are invalid."""
    path = path_argument(args, "path", TOOL)
    assert path is not None
    every = args.get("replace_all") or False
    if not isinstance(every, bool):
        raise FileToolError("Error: 'replace_all' must be true or false")
    batch = args.get("edits")
    single = any(args.get(key) is not None for key in ("old_string", "new_string", "near_line"))
    if batch is not None and single:
        raise FileToolError(
            "Error: give either old_string/new_string (one edit) or edits (several), not both"
        )
    if batch is not None:
        if every:
            raise FileToolError("Error: replace_all cannot be combined with edits")
        return path, _batch(batch), False, True
    if not single:
        raise FileToolError("Error: edit_file needs old_string and new_string, or an edits list")
    edit = _edit(args, "")
    if every and edit.near_line is not None:
        raise FileToolError("Error: replace_all cannot be combined with near_line")
    return path, [edit], every, False


def _batch(batch: Any) -> list[Edit]:
    if not isinstance(batch, list) or not batch:
        raise FileToolError("Error: 'edits' must be a non-empty list of {old_string, new_string} objects")
    edits = []
    for n, entry in enumerate(batch):
        where = f"edit {n + 1}: "
        if not isinstance(entry, dict):
            raise FileToolError(f"Error: {where}each edit must be an object with old_string and new_string")
        unknown = sorted(set(entry) - EDIT_KEYS)
        if unknown:
            raise FileToolError(
                f"Error: {where}unknown key(s) {', '.join(unknown)}; an edit takes "
                "old_string, new_string and near_line"
            )
        edits.append(_edit(entry, where))
    return edits


def _edit(fields: dict[str, Any], where: str) -> Edit:
    old, new, near = fields.get("old_string"), fields.get("new_string"), fields.get("near_line")
    if not isinstance(old, str) or not old:
        raise FileToolError(f"Error: {where}'old_string' must be a non-empty string")
    if not isinstance(new, str):
        raise FileToolError(f"Error: {where}'new_string' must be a string (empty to delete the text)")
    check_text(old, "old_string", TOOL, where)
    check_text(new, "new_string", TOOL, where)
    if old == new:
        raise FileToolError(f"Error: {where}old_string and new_string are identical, so nothing would change")
    if near is not None and (isinstance(near, bool) or not isinstance(near, int) or near < 1):
        raise FileToolError(f"Error: {where}'near_line' must be a line number, 1 or more")
    return Edit(old, new, near)


def _refusal(args: dict[str, Any], message: str) -> Preparation:
    return Preparation(dict(args), TOOL, needs_approval=False, error=message)
