"""The three things a client asks of a workstream, with the same bodies over HTTP and websocket."""

from __future__ import annotations

import re
from typing import Any

from app.engine.life import approvals, cancel, turns
from app.engine.publishing.outbox import Defer
from app.engine.subagents import decisions
from app.errors import BadRequestError, PayloadTooLargeError
from app.runtime import Runtime
from app.settings import MAX_ID_CHARS, MAX_NAME_CHARS
from app.users.principal import Principal
from app.web.requests import field

# 1-200 printable ASCII characters: what fits the stored column and any HTTP header.
_IDEMPOTENCY_KEY = re.compile(rf"[\x20-\x7e]{{1,{MAX_NAME_CHARS}}}")


def send(
    rt: Runtime,
    ws_id: str,
    body: dict[str, Any],
    idempotency_key: str | None = None,
    defer: Defer | None = None,
) -> tuple[int, dict[str, Any]]:
    """`idempotency_key` comes from the HTTP header; over the websocket, from the body. With
    `defer`, the turn's first step and events follow the answer (`turns.send`)."""
    message = field(body, "message", str, required=True)
    if not message.strip():
        raise BadRequestError("message: must not be empty", field="message")
    if idempotency_key is None:
        idempotency_key = field(body, "idempotency_key", str)
    key = checked_idempotency_key(idempotency_key)
    turn = turns.send(rt, ws_id, message, idempotency_key=key, defer=defer)
    return 202, {"turn_id": turn.id, "status": turn.status}


def checked_idempotency_key(key: str | None) -> str | None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise BadRequestError(
            f"idempotency_key: expected 1-{MAX_NAME_CHARS} printable ASCII characters",
            field="idempotency_key",
        )
    return key


def approve(
    rt: Runtime, ws_id: str, body: dict[str, Any], by: Principal, via: str
) -> tuple[int, dict[str, Any]]:
    """`by` decides through `via` (http, websocket, cli): both are stored on the calls decided."""
    decision = approvals.Decision(
        approved=field(body, "approved", bool, required=True),
        feedback=checked_feedback(rt, field(body, "feedback", str)),
        always=field(body, "always", bool, default=False),
        call_id=field(body, "call_id", str, max_chars=MAX_NAME_CHARS),
        by=by.name,
        by_id=by.user_id,
        via=via,
    )
    child = field(body, "child_ws_id", str, max_chars=MAX_ID_CHARS)
    return 200, decisions.decide(rt, ws_id, decision, child).as_dict()


def checked_feedback(rt: Runtime, feedback: str | None) -> str | None:
    """A decision's feedback reaches the model as a message does (a user message after the
    results, or in a denied call's result): the same limit, in UTF-8 bytes."""
    if feedback and len(feedback.encode()) > rt.settings.max_message_bytes:
        raise PayloadTooLargeError(
            f"feedback: {len(feedback.encode())} bytes; the limit is {rt.settings.max_message_bytes}",
            field="feedback",
        )
    return feedback or None


def cancel_turn(rt: Runtime, ws_id: str, body: dict[str, Any], by: str) -> tuple[int, dict[str, Any]]:
    done = cancel.cancel(rt, ws_id, by=by, turn_id=field(body, "turn_id", str, max_chars=MAX_NAME_CHARS))
    if done.ended:  # a queued turn, withdrawn: it never started, so it has no children
        return 200, {"turn_id": done.turn_id, "cancel_requested": True, "status": "cancelled"}
    cancel.stop_children(rt, done.turn_id, by=by)  # now, not when the turn's running batch ends
    return 202, {"turn_id": done.turn_id, "cancel_requested": True, "status": "active"}
