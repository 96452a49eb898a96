"""The three things a client asks of a workstream, with the same bodies over HTTP and websocket."""

from __future__ import annotations

from typing import Any

from app.engine import approvals, cancel, turns
from app.runtime import Runtime
from app.web.requests import field


def send(rt: Runtime, ws_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    message = field(body, "message", str, required=True)
    turn = turns.send(rt, ws_id, message)
    return 202, {"turn_id": turn.id, "status": turn.status}


def approve(rt: Runtime, ws_id: str, body: dict[str, Any], by: str) -> tuple[int, dict[str, Any]]:
    decision = approvals.Decision(
        approved=field(body, "approved", bool, required=True),
        feedback=field(body, "feedback", str) or None,
        always=field(body, "always", bool, default=False),
        call_id=field(body, "call_id", str),
        by=by,
    )
    return 200, approvals.decide(rt, ws_id, decision).as_dict()


def cancel_turn(rt: Runtime, ws_id: str, body: dict[str, Any], by: str) -> tuple[int, dict[str, Any]]:
    turn_id = cancel.cancel(rt, ws_id, by=by, turn_id=field(body, "turn_id", str))
    return 202, {"turn_id": turn_id, "cancel_requested": True}
