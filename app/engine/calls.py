"""Stored tool calls: how they are announced, read and turned into model messages."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from app.storage.models import ToolCall

INTERRUPTED_OUTPUT = (
    "Interrupted: the worker running this call stopped before it finished. "
    "Its outcome is unknown (it may have partly run); check before running it again."
)
CANCELLED_OUTPUT = "Cancelled by user before it ran."


def item(call: ToolCall) -> dict[str, Any]:
    """A call as `tool_info` / `approve_request` items and the workstream API show it."""
    return {
        "call_id": call.call_id,
        "func_name": call.func_name,
        "header": call.header,
        "preview": call.preview,
        "needs_approval": call.needs_approval,
        "error": call.error,
        "status": call.status,
    }


def batch(s: Session, turn_id: str, step: int) -> list[ToolCall]:
    return list(
        s.exec(
            select(ToolCall)
            .where(ToolCall.turn_id == turn_id, ToolCall.step == step)
            .order_by(col(ToolCall.position))
        ).all()
    )


def denial_text(feedback: str | None) -> str:
    return f"Denied by user: {feedback}" if feedback else "Denied by user"
