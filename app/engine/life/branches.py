"""Branches of a conversation: rewind it, restore what a rewind took out, edit a message and
send it again, retry the last one, fork it into a new workstream.

A rewind moves every message after a point out of the conversation into a `Branch`, in one
transaction, on a workstream with no turn running or queued: the rows stay where they are,
marked with the branch's id (so no message id is ever used twice), and a restore unmarks them
(the conversation's tail since the point becoming a branch of its own). Each change bumps the
workstream's `history_version`, which tells a worker's copy of the conversation to read it
anew. A point is a turn's boundary: the first message taken out is always a user message, so
no tool call is ever parted from its result. What the tools did to the folder
is not undone. Every change is announced (`branch_changed`), so each follower reloads the
history.

Edit and retry are a rewind to just before a user message and a send, as two transactions; the
branch keeps the request's idempotency key, so a request retried after a fault between the two
finds its rewind done and only sends. A fork copies the conversation up to a message into a new
workstream of the same owner and settings, in one transaction; its working folder is the
origin's, or a copy made before that transaction (`copy_folder`) and removed if it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, func, select

from app.engine.conversation import stored
from app.engine.life import turns
from app.engine.life.turns import Sent, new_id
from app.engine.publishing.outbox import Defer, ordered
from app.errors import BadRequestError, ConflictError, NotFoundError, PayloadTooLargeError, UnprocessableError
from app.events import EventType
from app.previews import store as previews_store
from app.runtime import Runtime
from app.sandbox import folders
from app.storage.models import Branch, Message, Turn, TurnStatus, Workstream
from app.tools.core.tool import INTERACTIVE
from app.users.known_owners import Owner

PREVIEW_CHARS = 200
COPY_TIMEOUT_SECONDS = 600
BUSY = "workstream {ws_id} has a turn running or queued: wait for it to end, or cancel it, first"


def rewind(rt: Runtime, ws_id: str, to: int, by: str | None) -> dict[str, Any]:
    """Take every message after message `to` (0: all of them) out of the conversation into a
    branch; what was done."""
    with ordered(rt, ws_id) as out, rt.db.session() as s:
        _idle(s, ws_id)
        branch = _take_out(s, ws_id, to, by, "rewind")
        done = _changed(branch, None, to)
        out.add(EventType.BRANCH_CHANGED, **done)
    return done


def restore(rt: Runtime, ws_id: str, branch_id: str, by: str | None) -> dict[str, Any]:
    """Put a branch's messages back after the point it was taken from; the conversation's tail
    since then becomes a branch of its own."""
    with ordered(rt, ws_id) as out, rt.db.session() as s:
        _idle(s, ws_id)
        branch = _branch(s, ws_id, branch_id)
        point = branch.after_message_id
        if point and _message(s, ws_id, point) is None:
            raise ConflictError(
                f"branch {branch_id} followed message {point}, which is no longer in the conversation: "
                "restore the branch that holds it first",
                after_message_id=point,
            )
        replaced = _take_out(s, ws_id, point, by, "restore")
        s.exec(
            update(Message)
            .where(col(Message.ws_id) == ws_id, col(Message.branch_id) == branch_id)
            .values(branch_id=None)
        )
        s.delete(branch)
        _bump(s, ws_id)
        done = _changed(replaced, branch_id, point)
        out.add(EventType.BRANCH_CHANGED, **done)
    return done


def edit(
    rt: Runtime,
    ws_id: str,
    message_id: int,
    text: str,
    by: str | None,
    idempotency_key: str | None = None,
    defer: Defer | None = None,
    reason: str = "edit",
) -> Sent:
    """Send `text` in place of the user message `message_id`: the conversation is rewound to
    just before it (that message and all after it kept in a branch), then `text` is sent, with
    the attachments the message was sent with."""
    turns.check_size(rt, text)
    if idempotency_key is not None:
        earlier = turns.sent_for_key(rt, ws_id, idempotency_key)
        if earlier is not None:
            return earlier
    attached = None
    if idempotency_key is not None and (again := _branch_for_key(rt, ws_id, idempotency_key)) is not None:
        attached = _first_message(rt, again.id)[1]  # rewound before a fault: what it took out
    else:
        with ordered(rt, ws_id) as out, rt.db.session() as s:
            _idle(s, ws_id)
            row = _message(s, ws_id, message_id)
            if row is None:
                raise NotFoundError(f"no message {message_id} in workstream {ws_id}")
            if row.role != "user":
                raise BadRequestError(f"message {message_id} is not a user message: only those are edited")
            attached = row.attachments
            before = s.exec(
                select(func.max(Message.id)).where(
                    Message.ws_id == ws_id, col(Message.branch_id).is_(None), col(Message.id) < message_id
                )
            ).one()
            branch = _take_out(s, ws_id, before or 0, by, reason, idempotency_key)
            out.add(EventType.BRANCH_CHANGED, **_changed(branch, None, before or 0))
    return turns.send(rt, ws_id, text, idempotency_key=idempotency_key, defer=defer, attachments=attached)


def retry(
    rt: Runtime, ws_id: str, by: str | None, idempotency_key: str | None = None, defer: Defer | None = None
) -> Sent:
    """Send the last user message again, its old answer kept in a branch."""
    if idempotency_key is not None:
        earlier = turns.sent_for_key(rt, ws_id, idempotency_key)
        if earlier is not None:
            return earlier
        again = _branch_for_key(rt, ws_id, idempotency_key)
        if again is not None:  # rewound before a fault: send what it took out
            text, attached = _first_message(rt, again.id)
            return turns.send(
                rt, ws_id, text, idempotency_key=idempotency_key, defer=defer, attachments=attached
            )
    with rt.db.reader() as s:
        last = s.exec(
            _active(ws_id).where(Message.role == "user").order_by(col(Message.id).desc()).limit(1)
        ).first()
    if last is None or last.id is None:
        raise ConflictError(f"workstream {ws_id} has no message to retry")
    return edit(rt, ws_id, last.id, last.content or "", by, idempotency_key, defer, reason="retry")


def fork(
    rt: Runtime,
    ws_id: str,
    at: int | None,
    name: str | None,
    copy_folder: bool,
) -> Workstream:
    """A new workstream with this one's owner and settings whose conversation is a copy of this
    one's up to and including message `at` (None: all of it)."""
    with rt.db.reader() as s:
        origin = _idle(s, ws_id)
        if at is not None and _message(s, ws_id, at) is None:
            raise NotFoundError(f"no message {at} in workstream {ws_id}")
        through = at if at is not None else _last_id(s, ws_id)
        rows = s.exec(
            select(Message)
            .where(Message.ws_id == ws_id, col(Message.id) <= through)
            .order_by(col(Message.id))
        ).all()
        after = s.exec(
            select(Message)
            .where(Message.ws_id == ws_id, col(Message.id) > through)
            .order_by(col(Message.id))
            .limit(1)
        ).first()
        _at_boundary(after, through, "at")
    new_ws_id = new_id()
    folder = _copy_folder(rt, origin, new_ws_id) if copy_folder else origin.working_dir
    ws = Workstream(
        id=new_ws_id,
        name=name or f"{origin.name} (fork)"[:200],
        model=origin.model,
        auto_approve=origin.auto_approve,
        smart_approve=origin.smart_approve,
        auto_approve_tools=list(origin.auto_approve_tools),
        read_paths=list(origin.read_paths),
        expanded_tools=list(origin.expanded_tools),
        working_dir=folder,
        tool_search=origin.tool_search,
        owner_id=origin.owner_id,
        skill=origin.skill,
        skill_content=origin.skill_content,
        network=origin.network,
        forked_from=ws_id,
        forked_at=through,
    )
    try:
        with rt.db.session() as s:
            s.add(ws)
            s.flush()  # the workstream before the messages that refer to it
            sent = {str(item.get("attachment_id")) for row in rows for item in row.attachments or []}
            renamed = previews_store.copy_attachments(s, ws_id, new_ws_id, sent) if sent else {}
            for row in rows:
                s.add(_copy(new_ws_id, row, renamed))
    except BaseException:
        if copy_folder:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    rt.owners.add(new_ws_id, Owner(origin.owner_id))
    return ws


def listing(rt: Runtime, ws_id: str) -> dict[str, Any]:
    with rt.db.reader() as s:
        if s.get(Workstream, ws_id) is None:
            raise NotFoundError(f"no workstream {ws_id}")
        rows = s.exec(
            select(Branch)
            .where(Branch.ws_id == ws_id)
            .order_by(col(Branch.created_at).desc(), col(Branch.id))
        ).all()
        return {"branches": [_summary(b) for b in rows]}


def describe(rt: Runtime, ws_id: str, branch_id: str) -> dict[str, Any]:
    with rt.db.reader() as s:
        branch = _branch(s, ws_id, branch_id)
        rows = s.exec(
            select(Message)
            .where(Message.ws_id == ws_id, Message.branch_id == branch_id)
            .order_by(col(Message.id))
        ).all()
        return {**_summary(branch), "messages": [stored.as_history(row) for row in rows]}


# -- the pieces ----------------------------------------------------------------------------------


def _idle(s: Session, ws_id: str) -> Workstream:
    """The interactive workstream, locked, with no turn running or queued; else 404, 422 or 409."""
    ws = s.exec(select(Workstream).where(Workstream.id == ws_id).with_for_update()).first()
    if ws is None:
        raise NotFoundError(f"no workstream {ws_id}")
    if ws.kind != INTERACTIVE:  # a sub-agent's conversation is its parent's to steer
        raise UnprocessableError(
            f"workstream {ws_id} is a {ws.kind} workstream: only interactive ones branch"
        )
    busy = s.exec(
        select(func.count())
        .select_from(Turn)
        .where(Turn.ws_id == ws_id, col(Turn.status).in_([TurnStatus.QUEUED, TurnStatus.ACTIVE]))
    ).one()
    if busy:
        raise ConflictError(BUSY.format(ws_id=ws_id), active_turn_id=ws.active_turn_id)
    return ws


def _take_out(
    s: Session, ws_id: str, after: int, by: str | None, reason: str, idempotency_key: str | None = None
) -> Branch | None:
    """Every message after message `after` moved into a new branch; None when there is none."""
    if after and _message(s, ws_id, after) is None:
        raise NotFoundError(f"no message {after} in workstream {ws_id}")
    first = s.exec(_active(ws_id).where(col(Message.id) > after).order_by(col(Message.id)).limit(1)).first()
    if first is None:
        return None
    _at_boundary(first, after, "to")
    branch = Branch(
        id=new_id(),
        ws_id=ws_id,
        after_message_id=after,
        reason=reason,
        created_by=by,
        message_count=0,
        preview=(first.content or "")[:PREVIEW_CHARS],
        idempotency_key=idempotency_key,
    )
    s.add(branch)
    s.flush()
    moved = s.exec(
        update(Message)
        .where(col(Message.ws_id) == ws_id, col(Message.branch_id).is_(None), col(Message.id) > after)
        .values(branch_id=branch.id)
    )
    branch.message_count = moved.rowcount
    s.add(branch)
    _bump(s, ws_id)
    return branch


def _bump(s: Session, ws_id: str) -> None:
    s.exec(
        update(Workstream)
        .where(col(Workstream.id) == ws_id)
        .values(history_version=Workstream.history_version + 1)
    )


def _active(ws_id: str) -> Any:
    """The workstream's messages in its conversation (not in a branch)."""
    return select(Message).where(Message.ws_id == ws_id, col(Message.branch_id).is_(None))


def _at_boundary(first_after: Message | None, point: int, name: str) -> None:
    """A point must end a turn: what follows it (if anything) is a user message."""
    if first_after is not None and first_after.role != "user":
        raise BadRequestError(
            f"{name}: message {point} is inside a turn (message {first_after.id} after it is a "
            f"{first_after.role} message); choose a user message's id or the answer that ends a turn",
            field=name,
        )


def _message(s: Session, ws_id: str, message_id: int) -> Message | None:
    """Message `message_id` if it is in the workstream's conversation."""
    row = s.get(Message, message_id)
    return row if row is not None and row.ws_id == ws_id and row.branch_id is None else None


def _last_id(s: Session, ws_id: str) -> int:
    return (
        s.exec(
            select(func.max(Message.id)).where(Message.ws_id == ws_id, col(Message.branch_id).is_(None))
        ).one()
        or 0
    )


def _first_message(rt: Runtime, branch_id: str) -> tuple[str, list[dict[str, Any]] | None]:
    """The text and attachments of the branch's first message."""
    with rt.db.reader() as s:
        first = s.exec(
            select(Message).where(Message.branch_id == branch_id).order_by(col(Message.id)).limit(1)
        ).first()
    return ((first.content or ""), first.attachments) if first is not None else ("", None)


def _branch(s: Session, ws_id: str, branch_id: str) -> Branch:
    branch = s.get(Branch, branch_id)
    if branch is None or branch.ws_id != ws_id:
        raise NotFoundError(f"no branch {branch_id} in workstream {ws_id}")
    return branch


def _copy(ws_id: str, row: Message, renamed: dict[str, str]) -> Message:
    """A fork's copy of one message (a new row of its own), naming the fork's copies of the
    attachments it was sent with (`renamed`: old id -> new)."""
    fields = row.model_dump(exclude={"id", "ws_id", "branch_id", "attachments"})
    sent = [
        {**item, "attachment_id": renamed.get(str(item.get("attachment_id")), item.get("attachment_id"))}
        for item in row.attachments or []
    ]
    return Message(ws_id=ws_id, attachments=sent or None, **fields)


def _summary(branch: Branch) -> dict[str, Any]:
    return {
        "id": branch.id,
        "after_message_id": branch.after_message_id,
        "reason": branch.reason,
        "created_by": branch.created_by,
        "created_at": branch.created_at.isoformat(),
        "message_count": branch.message_count,
        "preview": branch.preview,
    }


def _changed(taken: Branch | None, restored: str | None, point: int) -> dict[str, Any]:
    return {
        "branch": taken.id if taken is not None else None,
        "archived": taken.message_count if taken is not None else 0,
        "restored": restored,
        "after_message_id": point,
    }


def _branch_for_key(rt: Runtime, ws_id: str, key: str) -> Branch | None:
    with rt.db.reader() as s:
        return s.exec(select(Branch).where(Branch.ws_id == ws_id, Branch.idempotency_key == key)).first()


def _copy_folder(rt: Runtime, origin: Workstream, new_ws_id: str) -> str:
    """A new folder of the fork's own holding a copy of the origin's (a reflink where the
    filesystem can); PayloadTooLargeError past `fork_copy_max_bytes`."""
    limit = rt.settings.fork_copy_max_bytes
    size = _size(origin.working_dir, limit)
    if size > limit:
        raise PayloadTooLargeError(
            f"copy_folder: the working folder holds more than {limit} bytes "
            "(TURNSTONE_FORK_COPY_MAX_BYTES); fork without copying it, or make it smaller",
            field="copy_folder",
        )
    folder = folders.make(rt.settings, origin.owner_id, new_ws_id)
    try:
        done = subprocess.run(
            ["cp", "-a", "--reflink=auto", "--", os.path.join(origin.working_dir, "."), folder],
            capture_output=True,
            text=True,
            timeout=COPY_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise BadRequestError(f"copy_folder: the copy failed ({type(exc).__name__})") from None
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise BadRequestError(f"copy_folder: the copy failed: {done.stderr.strip()[:300]}")
    return folder


def _size(folder: str, limit: int) -> int:
    """Bytes below `folder` (links not followed), counted until past `limit`."""
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > limit:
                return total
    return total
