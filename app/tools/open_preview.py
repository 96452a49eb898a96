"""The open_preview tool: a URL, a file in the workstream's folder, or an attachment shown to
the user in the preview pane. The model gets one line back; clients get a `preview` event.

URLs go through the guarded fetcher (and need approval); files and attachments are local
reads and run unprompted. A file outside the workstream's folder is refused, and so is one the
file tools may never open (app.tools.files.reach), whatever links lead there.
"""

from __future__ import annotations

import os
import re
from typing import Any

from app.errors import NotFoundError
from app.previews import kinds, store
from app.previews.kinds import KindError
from app.settings import MAX_NAME_CHARS
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.files import reach
from app.tools.files.paths import FileToolError, path_argument
from app.tools.web.fetch import prepared
from app.tools.web.fetch.errors import FetchError
from app.tools.web.fetch.fetcher import Fetcher

TOOL = "open_preview"
ATTACHMENT = "attachment:"
SHOWN_NOTE = "Shown in your preview pane; the model is told only that it opened."
NO_STORAGE = "Error: open_preview cannot run here: this service keeps no previews"
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


def prepare(args: dict[str, Any], ctx: ToolContext) -> Preparation:
    try:
        target = path_argument(args, "target", TOOL)
        assert target is not None
        clean: dict[str, Any] = {"target": target.strip()}
        kind, title = args.get("kind"), args.get("title")
        if kind is not None:
            if kind not in kinds.KINDS:
                raise FileToolError(f"Error: kind must be one of {', '.join(kinds.KINDS)}, not {kind!r}")
            clean["kind"] = kind
        if title is not None:
            if not isinstance(title, str) or "\0" in title or len(title) > MAX_NAME_CHARS:
                raise FileToolError(f"Error: title must be a string of at most {MAX_NAME_CHARS} characters")
            clean["title"] = " ".join(title.split())
    except FileToolError as exc:
        return Preparation(dict(args), TOOL, needs_approval=False, error=str(exc))
    header = f"{TOOL} {clean['target']}"
    if _is_url(clean["target"]):
        return _prepare_url(clean, header, ctx)
    if not clean["target"].startswith(ATTACHMENT):
        try:
            _check(clean["target"], ctx)
        except FileToolError as exc:
            return Preparation(clean, header, needs_approval=False, error=str(exc))
    return Preparation(clean, header, needs_approval=False)


def _check(path: str, ctx: ToolContext) -> str:
    """The resolved path of a file the preview may show: one in the workstream's folder that the
    file tools may read."""
    if not _is_inside(reach.resolve(path, ctx), ctx.working_dir):
        raise FileToolError(f"Error: {path} is outside the workstream's folder, {ctx.working_dir}")
    return reach.check(path, ctx, reach.READ)  # the never-opened files the folder may hold


def _prepare_url(clean: dict[str, Any], header: str, ctx: ToolContext) -> Preparation:
    fetcher: Fetcher | None = ctx.fetcher
    if fetcher is None:
        return Preparation(clean, header, needs_approval=False, error="Error: this service has no fetcher")
    try:
        target = fetcher.screen(clean["target"])  # refused here, nobody is asked about it
    except FetchError as exc:
        return Preparation(clean, header, needs_approval=False, error=str(exc))
    lines = [f"GET {clean['target']}", SHOWN_NOTE, target.approval_note()]
    preview = "\n".join(line for line in lines if line)
    # What runs must be what was approved: the run is held to the network seen here.
    return Preparation(prepared.recorded(clean, target), header, preview=preview, needs_approval=True)


def execute(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if ctx.db is None:
        return ToolOutcome(NO_STORAGE, is_error=True)
    try:
        content = _content(args, ctx)
    except (FetchError, KindError, FileToolError) as exc:
        return ToolOutcome(str(exc), is_error=True)
    row = store.add_preview(ctx.db, ctx.ws_id, ctx.call_id, content)
    ctx.publish("preview", {"preview_id": row.id, "kind": row.kind, "title": row.title})
    return ToolOutcome(f'Opened "{row.title}" ({row.kind}, {row.size:,} bytes) in the preview pane.')


def _content(args: dict[str, Any], ctx: ToolContext) -> store.Content:
    target: str = args["target"]
    kind: str | None = args.get("kind")
    if _is_url(target):
        return _from_url(target, kind, args.get("title"), prepared.is_private_approved(args), ctx)
    if target.startswith(ATTACHMENT):
        assert ctx.db is not None
        try:
            attached, data = store.attachment(ctx.db, ctx.ws_id, target[len(ATTACHMENT) :])
        except NotFoundError as exc:
            raise FileToolError(f"Error: {exc.message}") from None
        found = kinds.classify(data, attached.filename, attached.media_type, kind)
        return store.Content(
            found.kind, found.media_type, args.get("title") or attached.filename, target, data
        )
    return _from_file(target, kind, args.get("title"), ctx)


def _from_url(
    url: str, kind: str | None, title: str | None, private_ok: bool, ctx: ToolContext
) -> store.Content:
    fetcher: Fetcher = ctx.fetcher
    page = fetcher.fetch(url, should_stop=ctx.is_cancelled, private_ok=private_ok)
    if page.status >= 300:
        raise FetchError(f"Error: {page.url} answered {page.status} {page.reason}".rstrip())
    name = page.url.split("?", 1)[0].rsplit("/", 1)[-1]
    found = kinds.classify(page.body, name, page.content_type, kind, page.charset)
    shown = title or (_page_title(page.body) if found.kind == "web" else None) or page.url
    base = page.url if found.kind == "web" else None
    return store.Content(found.kind, found.media_type, shown, url, page.body, base_url=base)


def _from_file(path: str, kind: str | None, title: str | None, ctx: ToolContext) -> store.Content:
    resolved = _check(path, ctx)  # again: a link may have moved since prepare
    if not os.path.isfile(resolved):
        raise FileToolError(f"Error: {path} is not a file")
    with os.fdopen(reach.open_file(resolved, path, ctx), "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > kinds.LARGEST:
            raise FileToolError(f"Error: {path} is {size:,} bytes, over every preview's limit")
        data = file.read(kinds.LARGEST + 1)
    found = kinds.classify(data, resolved, "", kind)
    return store.Content(found.kind, found.media_type, title or os.path.basename(resolved), path, data)


def _page_title(body: bytes) -> str | None:
    match = _TITLE.search(body[:65536])
    if match is None:
        return None
    text = " ".join(match.group(1).decode("utf-8", "replace").split())
    return text[:MAX_NAME_CHARS] or None


def _is_url(target: str) -> bool:
    return target.lower().startswith(("http://", "https://"))


def _is_inside(resolved: str, folder: str) -> bool:
    root = os.path.realpath(folder)
    return resolved == root or resolved.startswith(root.rstrip(os.sep) + os.sep)
