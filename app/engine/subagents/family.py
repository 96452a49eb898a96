"""Task sub-agents: a `task_agent` call starts a child workstream (kind `task`) whose one turn
runs as ordinary Celery phases; what the parent shows of its children.

The child inherits the parent's model, working directory and approval settings; its
tools are the task kind's (never task_agent). Its end is the fan-in (app/engine/subagents/fanin.py).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.engine.life import calls
from app.engine.life.turns import activate_next, new_id
from app.runtime import Runtime
from app.storage.models import CallStatus, ToolCall, Turn, Workstream, WorkstreamState
from app.storage.types import storable
from app.tools.core.tool import TASK
from app.users import ownership

ORIGIN = "task_agent"  # the child turn's origin
NAME_CHARS = 80


def start(rt: Runtime, parent: Workstream, turn_id: str, call: ToolCall, prompt: str) -> str:
    """The child that answers `call`, started on `prompt`; its workstream id. One child per
    call, whoever asks again (the call's row id is unique among children)."""
    assert call.id is not None
    existing = _child_of(rt, call.id)
    if existing is not None:
        return existing
    child_id = new_id()
    try:
        with rt.db.session() as s:
            s.add(
                Workstream(
                    id=child_id,
                    name=_name(prompt),
                    kind=TASK,
                    parent_id=parent.id,
                    parent_turn_id=turn_id,
                    parent_call_id=call.call_id,
                    parent_call_row=call.id,
                    model=parent.model,
                    auto_approve=parent.auto_approve,
                    smart_approve=parent.smart_approve,
                    auto_approve_tools=list(parent.auto_approve_tools),
                    working_dir=parent.working_dir,
                    network=parent.network,  # a sub-agent reaches no further than its parent
                    owner_id=ownership.owner_for_child(parent),
                )
            )
            s.flush()  # the turn's foreign key needs the workstream first
            s.add(Turn(id=new_id(), ws_id=child_id, message=prompt, origin=ORIGIN))
    except IntegrityError:
        raced = _child_of(rt, call.id)
        if raced is None:
            raise
        return raced
    activate_next(rt, child_id)
    return child_id


def _child_of(rt: Runtime, call_row: int) -> str | None:
    with rt.db.reader() as s:
        return s.exec(select(Workstream.id).where(Workstream.parent_call_row == call_row)).first()


def _name(prompt: str) -> str:
    first = " ".join(prompt.split())[:NAME_CHARS]
    return storable(f"sub-agent: {first}")


# -- what the parent shows -----------------------------------------------------------------


def children_by_call(s: Session, ws_id: str) -> dict[tuple[Any, Any], str]:
    """(parent turn id, call id) -> child workstream id, for every child of the workstream."""
    rows = s.exec(
        select(Workstream.id, Workstream.parent_turn_id, Workstream.parent_call_id).where(
            Workstream.parent_id == ws_id, Workstream.kind == TASK
        )
    ).all()
    return {(turn_id, call_id): child_id for child_id, turn_id, call_id in rows if turn_id and call_id}


def tag_history(s: Session, ws_id: str, messages: list[dict[str, Any]]) -> None:
    """Name each task_agent call's child in the history: on the assistant's call and on the
    tool message that answers it."""
    children = children_by_call(s, ws_id)
    if not children:
        return
    for m in messages:
        if m.get("tool_calls"):
            m["tool_calls"] = [_tagged(c, children.get((m["turn_id"], c.get("id")))) for c in m["tool_calls"]]
        if m["role"] == "tool" and (child := children.get((m["turn_id"], m.get("tool_call_id")))):
            m["child_ws_id"] = child


def _tagged(call: dict[str, Any], child: str | None) -> dict[str, Any]:
    return {**call, "child_ws_id": child} if child else call


def working_children(s: Session, ws_id: str) -> list[Workstream]:
    """The workstream's children whose turn is still running, oldest first."""
    return list(
        s.exec(
            select(Workstream)
            .where(Workstream.parent_id == ws_id, col(Workstream.active_turn_id).is_not(None))
            .order_by(col(Workstream.created_at))
        ).all()
    )


def pending_rows(s: Session, ws: Workstream) -> list[ToolCall]:
    turn = s.get(Turn, ws.active_turn_id) if ws.active_turn_id else None
    rows = calls.batch(s, turn.id, turn.step) if turn else []
    return [r for r in rows if r.status == CallStatus.PENDING]


def parents_waiting(s: Session, parent_ids: list[str] | None = None) -> set[str]:
    """The workstreams (of `parent_ids`, or all) with a working sub-agent whose calls wait for a
    person: those calls are decided in the parent, so the parent needs attention too."""
    query = (
        select(Workstream.parent_id)
        .where(
            col(Workstream.parent_id).is_not(None),
            col(Workstream.active_turn_id).is_not(None),
            Workstream.state == WorkstreamState.ATTENTION,
        )
        .distinct()
    )
    if parent_ids is not None:
        query = query.where(col(Workstream.parent_id).in_(parent_ids))
    return {parent for parent in s.exec(query).all() if parent is not None}


def pending_items(s: Session, ws_id: str) -> list[dict[str, Any]]:
    """The children's calls waiting for a person, as the parent's workstream API lists them."""
    return [
        {**calls.item(row), "child_ws_id": child.id, "parent_call_id": child.parent_call_id}
        for child in working_children(s, ws_id)
        for row in pending_rows(s, child)
    ]
