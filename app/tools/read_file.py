"""The read_file tool: a text file as numbered lines, or an image for a model that can see.

The path counts as read (for edit_file's guard) as soon as the call is
prepared, so a read and an edit of the same file in one batch work.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from app.errors import NotFoundError
from app.previews import store
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.redaction import redact_output
from app.tools.files import images, reach
from app.tools.files.paths import (
    SNIFF_BYTES,
    FileToolError,
    binary_refusal,
    check_file,
    is_binary,
    mark_read,
    path_argument,
)

TOOL = "read_file"
ATTACHMENT = "attachment:"  # `attachment:<id>`: a file a person attached to the workstream
NOTICE_ROOM = 200  # characters kept free under tools.truncation for the closing note
COUNT_CHUNK = 1024 * 1024


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        path = path_argument(args, "path", TOOL)
        assert path is not None
        clean: dict[str, Any] = {"path": path}
        for key in ("offset", "limit"):
            value = args.get(key)
            if value is not None:
                clean[key] = _line_count(key, value)
        if path.startswith(ATTACHMENT):
            return Preparation(clean, _header(clean), needs_approval=False)
        resolved = reach.check(path, ctx, reach.READ)
    except FileToolError as exc:
        return Preparation(dict(args), TOOL, needs_approval=False, error=str(exc))
    if os.path.isfile(resolved):
        mark_read(ctx, resolved)
    return Preparation(clean, _header(clean), needs_approval=False)


def _line_count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        what = "a line number" if key == "offset" else "a number of lines"
        raise FileToolError(f"Error: '{key}' must be {what}, 1 or more (got {value!r})")
    return value


def _header(args: dict[str, Any]) -> str:
    offset, limit = args.get("offset"), args.get("limit")
    if offset is None and limit is None:
        return f"{TOOL} {args['path']}"
    first = offset or 1
    last = f"{first + limit - 1}" if limit else "end"
    return f"{TOOL} {args['path']} (lines {first}-{last})"


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    path = args["path"]
    offset, limit = args.get("offset") or 1, args.get("limit")
    try:
        if path.startswith(ATTACHMENT):
            return ToolOutcome(redact_output(_attachment(path, offset, limit, ctx), ctx))
        resolved = reach.check(path, ctx, reach.READ)  # again: a link may have moved since prepare
        check_file(resolved, path)
        with os.fdopen(reach.open_file(resolved, path, ctx), "rb") as file:
            media = images.media_type(resolved)
            if media is not None:
                size = os.fstat(file.fileno()).st_size
                return ToolOutcome(_image(path, resolved, media, size, file.read, ctx))
            return ToolOutcome(redact_output(_text(path, file, offset, limit, ctx), ctx))
    except FileToolError as exc:
        return ToolOutcome(redact_output(str(exc), ctx), is_error=True)


def _attachment(path: str, offset: int, limit: int | None, ctx: ToolContext) -> str:
    """A file a person attached: read like a file of that name."""
    if ctx.db is None:
        raise FileToolError("Error: this service keeps no attachments")
    try:
        attached, data = store.attachment(ctx.db, ctx.ws_id, path[len(ATTACHMENT) :])
    except NotFoundError as exc:
        raise FileToolError(f"Error: {exc.message}") from None
    media = images.media_type(attached.filename)
    if media is not None:
        return _image(path, attached.filename, media, len(data), lambda: data, ctx)
    return _text(path, io.BytesIO(data), offset, limit, ctx)


def _image(path: str, name: str, media: str, size: int, load: Callable[[], bytes], ctx: ToolContext) -> str:
    if ctx.model is None or not ctx.model.supports_vision:
        return (
            f"{path} is an image ({media}, {size:,} bytes). The current model cannot view images, "
            "so its content is not shown; describe what you need from it to the user, or inspect "
            "its metadata with bash."
        )
    if size > images.MAX_IMAGE_BYTES:
        raise FileToolError(
            f"Error: {path} is an image of {size:,} bytes; images over 4 MiB "
            f"({images.MAX_IMAGE_BYTES:,} bytes) are not read"
        )
    return images.marker(name, media, load())


def _text(path: str, file: BinaryIO, offset: int, limit: int | None, ctx: ToolContext) -> str:
    budget = max(ctx.settings.truncation - NOTICE_ROOM, 1)
    if is_binary(file.read(SNIFF_BYTES)):
        raise FileToolError(binary_refusal(path))
    file.seek(0)
    shown: list[str] = []
    size = 0
    number = 0
    for number, line in _numbered(file):
        if number < offset:
            continue
        text = f"{number:>4}\t{line}\n"
        if shown and size + len(text) > budget:
            rest = 1 + _count_lines(file)
            return _page(shown, number - 1, number - 1 + rest, "to stay within the output limit")
        shown.append(text)
        size += len(text)
        if limit is not None and len(shown) == limit:
            total = number + _count_lines(file)
            return _page(shown, number, total, "") if total > number else "".join(shown).rstrip("\n")
    if number == 0:
        return "(empty file)"
    if not shown:
        lines = f"{number:,} line{'s' * (number != 1)}"
        raise FileToolError(f"Error: offset {offset} is past the end of {path}, which has {lines}")
    return "".join(shown).rstrip("\n")


def _numbered(file: BinaryIO) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(file, start=1):
        yield number, raw.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")


def _count_lines(file: BinaryIO) -> int:
    """Lines left from the file's current position to its end."""
    count = 0
    last = b"\n"
    for chunk in iter(lambda: file.read(COUNT_CHUNK), b""):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def _page(shown: list[str], last: int, total: int, why: str) -> str:
    reason = f" {why}" if why else ""
    note = f"[stopped at line {last:,} of {total:,}{reason}; read on with offset={last + 1}]"
    return "".join(shown) + note
