"""What a coordinator is told of a child: its state and its last answer (read only: the waits
read this inside a turn's end, so nothing here reaches back into the engine)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from app.storage.models import Message, Workstream

ANSWER_CHARS = 4_000  # of a child's last answer, in what the coordinator's tools report


def described(s: Session, ws: Workstream) -> dict[str, Any]:
    return {
        "ws_id": ws.id,
        "name": ws.name,
        "state": ws.state,
        "is_working": is_working(ws),
        "closed": ws.closed_at is not None,
        "last_answer": last_answer(s, ws.id),
    }


def is_working(ws: Workstream) -> bool:
    """Whether the child is still at it: a turn running (a queued one starts when it ends)."""
    return ws.active_turn_id is not None


def last_answer(s: Session, ws_id: str) -> str | None:
    text = s.exec(
        select(Message.content)
        .where(Message.ws_id == ws_id, Message.role == "assistant", col(Message.content).is_not(None))
        .order_by(col(Message.id).desc())
        .limit(1)
    ).first()
    if text and len(text) > ANSWER_CHARS:
        return text[:ANSWER_CHARS] + f"… [{len(text) - ANSWER_CHARS:,} more characters in its history]"
    return text or None
