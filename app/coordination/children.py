"""A coordinator's children: ordinary (interactive) workstreams with the coordinator as parent,
owned by its owner; spawned, described, messaged, cancelled, closed and deleted here.

Closing a workstream stops its turns (the running one cancelled, the queued ones withdrawn) and
marks it closed: it takes no more messages, and its history stays. Closing a coordinator closes
its children.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from app.coordination import answers
from app.engine.life import cancel, turns, workstreams
from app.errors import ConflictError, NotFoundError
from app.runtime import Runtime
from app.storage.models import Turn, TurnStatus, Workstream, utcnow
from app.tools.commands import background
from app.tools.core.tool import COORDINATOR, INTERACTIVE
from app.users import ownership

MAX_CHILDREN = 50  # open (not closed) children of one coordinator
ORIGIN = "coordinator"  # the origin of a turn a coordinator started
OWN_FOLDER = "own"
SHARED_FOLDER = "shared"
FOLDERS = (OWN_FOLDER, SHARED_FOLDER)


def spawn(
    rt: Runtime,
    coordinator: Workstream,
    prompt: str,
    name: str | None = None,
    model: str | None = None,
    skill: str | None = None,
    folder: str = OWN_FOLDER,
) -> dict[str, Any]:
    """A new child started on `prompt`: its folder its own (or the coordinator's, `shared`), its
    approval settings and network the coordinator's."""
    _check_room(rt, coordinator.id, 1)
    turns.check_size(rt, prompt)
    child = workstreams.create(
        rt,
        name=name or _name(prompt),
        model=model,
        auto_approve=coordinator.auto_approve,
        smart_approve=coordinator.smart_approve,
        working_dir=coordinator.working_dir if folder == SHARED_FOLDER else None,
        owner_id=ownership.owner_for_child(coordinator),
        skill=skill,
        network=coordinator.network,
        is_admin=True,  # the coordinator's own folder and network: chosen when it was made
        parent_id=coordinator.id,
        auto_approve_tools=list(coordinator.auto_approve_tools),
    )
    sent = turns.send(rt, child.id, prompt, origin=ORIGIN)
    return {"ws_id": child.id, "name": child.name, "turn_id": sent.id}


def _check_room(rt: Runtime, coordinator_id: str, more: int) -> None:
    with rt.db.reader() as s:
        open_children = s.exec(
            select(Workstream.id).where(
                Workstream.parent_id == coordinator_id, col(Workstream.closed_at).is_(None)
            )
        ).all()
    if len(open_children) + more > MAX_CHILDREN:
        raise ConflictError(
            f"a coordinator has at most {MAX_CHILDREN} open workstreams ({len(open_children)} now): "
            "close some first"
        )


def _name(prompt: str) -> str:
    return " ".join(prompt.split())[:80] or "child"


def child(rt: Runtime, coordinator_id: str, ws_id: str) -> Workstream:
    """The coordinator's child `ws_id`; NotFoundError for any other workstream."""
    with rt.db.reader() as s:
        found = s.get(Workstream, ws_id)
    if found is None or found.parent_id != coordinator_id or found.kind != INTERACTIVE:
        raise NotFoundError(f"no workstream {ws_id} among this coordinator's children")
    return found


def listing(rt: Runtime, coordinator_id: str, with_closed: bool = False) -> list[dict[str, Any]]:
    query = select(Workstream).where(Workstream.parent_id == coordinator_id, Workstream.kind == INTERACTIVE)
    if not with_closed:
        query = query.where(col(Workstream.closed_at).is_(None))
    with rt.db.reader() as s:
        rows = s.exec(query.order_by(col(Workstream.created_at))).all()
    return [described(rt, ws, with_answer=False) for ws in rows]


def described(rt: Runtime, ws: Workstream, with_answer: bool = True) -> dict[str, Any]:
    """What a coordinator's tools say of a child: its state, its last answer, its pending calls."""
    with rt.db.reader() as s:
        out = answers.described(s, ws)
    out["model"] = ws.model
    if with_answer:
        out["pending_approvals"] = len(workstreams.describe(rt, ws.id)["pending_approvals"])
    else:
        out.pop("last_answer")
    return out


def send(rt: Runtime, coordinator_id: str, ws_id: str, message: str) -> dict[str, Any]:
    child(rt, coordinator_id, ws_id)
    sent = turns.send(rt, ws_id, message, origin=ORIGIN)
    return {"ws_id": ws_id, "turn_id": sent.id, "status": sent.status}


def stop(rt: Runtime, ws_id: str, by: str) -> bool:
    """Cancel the workstream's running turn and its sub-agents; whether one was running."""
    try:
        done = cancel.cancel(rt, ws_id, by=by)
    except ConflictError:
        return False
    if not done.ended:
        cancel.stop_children(rt, done.turn_id, by=by)
    return True


def close(rt: Runtime, ws_id: str, by: str) -> list[str]:
    """Close the workstream and, for a coordinator, its children; the ids closed now (one closed
    already is not)."""
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None:
            raise NotFoundError(f"no workstream {ws_id}")
        members = [ws_id]
        if ws.kind == COORDINATOR:
            members += list(s.exec(select(Workstream.id).where(Workstream.parent_id == ws_id)).all())
    return [member for member in members if _close_one(rt, member, by)]


def _close_one(rt: Runtime, ws_id: str, by: str) -> bool:
    with rt.db.session() as s:
        moved = s.exec(
            update(Workstream)
            .where(col(Workstream.id) == ws_id, col(Workstream.closed_at).is_(None))
            .values(closed_at=utcnow())
        )
    # Its turns are stopped whoever closed it first: a repeat finishes what a crash left.
    with rt.db.reader() as s:
        queued = s.exec(select(Turn.id).where(Turn.ws_id == ws_id, Turn.status == TurnStatus.QUEUED)).all()
    for turn_id in queued:
        try:
            cancel.cancel(rt, ws_id, by=by, turn_id=turn_id)
        except ConflictError:
            continue  # started or ended meanwhile: the active turn's cancel below sees to it
    stop(rt, ws_id, by)
    background.request_stop(rt.db, ws_id, why="its workstream was closed")
    if moved.rowcount == 1:
        rt.events.publish(ws_id, "workstream_closed", by=by)
    return moved.rowcount == 1


def close_all(rt: Runtime, coordinator_id: str, by: str) -> list[str]:
    with rt.db.reader() as s:
        ids = s.exec(
            select(Workstream.id).where(
                Workstream.parent_id == coordinator_id,
                Workstream.kind == INTERACTIVE,
                col(Workstream.closed_at).is_(None),
            )
        ).all()
    return [ws_id for ws_id in ids if _close_one(rt, ws_id, by)]
