"""Working folders: each workstream gets its own, `<data_root>/<owner>/<ws_id>`, made when the
workstream is; only an administrator (or the operator) may name another, and only inside the
roots the policy allows (the data root, `[sandbox] working_dir_roots`, TURNSTONE_WORKING_DIR)."""

from __future__ import annotations

import os
import time
import uuid

from sqlalchemy.exc import SQLAlchemyError

from app.errors import BadRequestError, ForbiddenError, UnprocessableError
from app.sandbox.reach import is_within
from app.settings import Settings
from app.storage import service_keys
from app.storage.database import Database

MARKER = ".turnstone-data-root"  # at the data root: the id of the service it belongs to
ROOT_KEY = "data-root"  # that id's name in service_keys
MARKER_WAIT_SECONDS = 5.0  # for the marker of a service named a moment ago by another process
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
        raise UnprocessableError(f"working_dir: {folder} is not a directory", field="working_dir")
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


def check_shared(settings: Settings, db: Database) -> str | None:
    """None when this process's data root is the service's one; else why it is not.

    Every web node and worker must see one data root (a shared filesystem): a folder is made by
    the web node and used by whichever worker runs its commands. The first process of a service
    to look names it, with an id kept in the database and in a marker file at the root; any
    other process finds the same id there, or its data root is not the shared one."""
    root = settings.sandbox.data_root
    marker = os.path.join(root, MARKER)
    try:
        os.makedirs(root, mode=FOLDER_MODE, exist_ok=True)
        wanted, named_now = _root_id(db)
    except (OSError, SQLAlchemyError) as exc:  # no database yet (not migrated), a root not writable
        return f"the data root {root} could not be checked ({type(exc).__name__})"
    if named_now:
        temporary = f"{marker}.{os.getpid()}"
        with open(temporary, "w") as file:
            file.write(wanted)
        os.replace(temporary, marker)
        return None
    found = _marker(marker)
    deadline = time.monotonic() + MARKER_WAIT_SECONDS
    while found is None and time.monotonic() < deadline:  # the process that named it may be writing it
        time.sleep(0.1)
        found = _marker(marker)
    if found == wanted:
        return None
    what = "no marker" if found is None else "another service's marker"
    return (
        f"the data root {root} holds {what} ({MARKER}): it is not the one this service's other "
        "processes share; mount the shared data root there (TURNSTONE_DATA_ROOT)"
    )


def _marker(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read().strip()
    except FileNotFoundError:
        return None


def _root_id(db: Database) -> tuple[str, bool]:
    """The service's data-root id, and whether this call made it."""
    return service_keys.get_or_make(db, ROOT_KEY, uuid.uuid4().hex)
