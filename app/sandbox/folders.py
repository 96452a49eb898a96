"""Working folders: each workstream gets its own, `<data_root>/<owner>/<ws_id>`, made when the
workstream is; only an administrator (or the operator) may name another, and only inside the
roots the policy allows (the data root, `[sandbox] working_dir_roots`, TURNSTONE_WORKING_DIR)."""

from __future__ import annotations

import os

from app.errors import BadRequestError, ForbiddenError
from app.sandbox.reach import is_within
from app.settings import Settings

OPERATOR_FOLDER = "_operator"  # the operator's workstreams (no user): no user id looks like it
FOLDER_MODE = 0o700
NAMED_BY_ADMINS = "working_dir: only an administrator may name a working folder; each workstream gets its own"


def allowed_roots(settings: Settings) -> tuple[str, ...]:
    """Where an administrator may name a workstream's folder, resolved."""
    roots = (settings.sandbox.data_root, *settings.sandbox.working_dir_roots, settings.working_dir)
    return tuple(dict.fromkeys(os.path.realpath(root) for root in roots))


def named(settings: Settings, working_dir: str, is_admin: bool) -> str:
    """The folder an administrator named, resolved and checked; ForbiddenError for anyone else,
    or for a folder outside the allowed roots; BadRequestError when it is not a folder."""
    if not is_admin:
        raise ForbiddenError(NAMED_BY_ADMINS)
    try:
        folder = os.path.realpath(os.path.expanduser(working_dir))
    except (ValueError, OSError):  # a NUL byte, a lone surrogate, a link it may not read
        raise BadRequestError("working_dir: not a usable path", field="working_dir") from None
    roots = allowed_roots(settings)
    if not any(is_within(folder, root) for root in roots):
        shown = ", ".join(roots)
        raise ForbiddenError(
            f"working_dir: {folder} is outside the roots a working folder may be in ({shown})"
        )
    if not os.path.isdir(folder):
        raise BadRequestError(f"working_dir: {folder} is not a directory", field="working_dir")
    return folder


def make(settings: Settings, owner_id: str | None, ws_id: str) -> str:
    """Make the workstream's own folder (and its owner's, the first time); its path."""
    owner = owner_id or OPERATOR_FOLDER
    if not _is_component(owner) or not _is_component(ws_id):
        raise BadRequestError(
            "working_dir: the owner or workstream id cannot name a folder", field="working_dir"
        )
    folder = os.path.join(settings.sandbox.data_root, owner, ws_id)
    os.makedirs(os.path.dirname(folder), mode=FOLDER_MODE, exist_ok=True)
    os.mkdir(folder, FOLDER_MODE)
    return folder


def _is_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and os.sep not in name and "\x00" not in name
