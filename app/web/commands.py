"""The three things a client asks of a workstream, with the same bodies over HTTP and websocket."""

from __future__ import annotations

import json
import re
from typing import Any

from app import attachments
from app.engine.life import approvals, cancel, turns
from app.engine.publishing.outbox import Defer
from app.engine.subagents import decisions
from app.errors import BadRequestError, PayloadTooLargeError, unstorable
from app.runtime import Runtime
from app.settings import MAX_NAME_CHARS
from app.usage import budgets
from app.users.principal import Principal
from app.web import shapes

# 1-200 printable ASCII characters: what fits the stored column and any HTTP header.
_IDEMPOTENCY_KEY = re.compile(rf"[\x20-\x7e]{{1,{MAX_NAME_CHARS}}}")


def send(
    rt: Runtime,
    ws_id: str,
    body: shapes.Send,
    idempotency_key: str | None = None,
    defer: Defer | None = None,
) -> tuple[int, dict[str, Any]]:
    """`idempotency_key` comes from the HTTP header, else from the body (a websocket's). With
    `defer`, the turn's first step and events follow the answer (`turns.send`)."""
    key = checked_idempotency_key(idempotency_key if idempotency_key is not None else body.idempotency_key)
    earlier = turns.sent_for_key(rt, ws_id, key) if key is not None else None
    if earlier is None:  # a retry of a stored send is answered as it was, whatever the budget now
        budgets.check(rt, ws_id)  # a spent budget starts no turn: 429, naming it and when it resets
    if earlier is None:
        attached = attachments.for_message(rt.db, ws_id, body.attachments)
        turn = turns.send(rt, ws_id, body.message, idempotency_key=key, defer=defer, attachments=attached)
    else:
        turn = earlier
    return 202, {"turn_id": turn.id, "status": turn.status}


def checked_idempotency_key(key: str | None) -> str | None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise BadRequestError(
            f"idempotency_key: expected 1-{MAX_NAME_CHARS} printable ASCII characters",
            field="idempotency_key",
        )
    return key


def approve(
    rt: Runtime, ws_id: str, body: shapes.Approve, by: Principal, via: str
) -> tuple[int, dict[str, Any]]:
    """`by` decides through `via` (http, websocket, cli): both are stored on the calls decided."""
    checked_edit(rt, body)
    decision = approvals.Decision(
        approved=body.approved,
        feedback=checked_feedback(rt, body.feedback),
        always=bool(body.always),
        call_id=body.call_id,
        by=by.name,
        by_id=by.user_id,
        via=via,
        arguments=body.arguments,
    )
    return 200, decisions.decide(rt, ws_id, decision, body.child_ws_id).as_dict()


def checked_edit(rt: Runtime, body: shapes.Approve) -> None:
    """An edit is one named call approved: what it means with a denial, several calls or
    "always" (approving the edited command's first word for good) is not guessed at."""
    if body.arguments is None:
        return
    for wrong, why in (
        (not body.approved, "a denied call does not run: there is nothing to edit"),
        (body.call_id is None, "name the call they are for (call_id)"),
        (bool(body.always), "an edited call is approved once, not always"),
    ):
        if wrong:
            raise BadRequestError(f"arguments: {why}", field="arguments")
    size = len(json.dumps(body.arguments, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > rt.settings.max_message_bytes:
        raise PayloadTooLargeError(
            f"arguments: {size} bytes of JSON; the limit is {rt.settings.max_message_bytes}",
            field="arguments",
        )
    _check_texts("arguments", body.arguments)


def _check_texts(where: str, value: Any) -> None:
    """Every key and string in an edit is text a command or a file can hold: no NUL, no lone
    surrogate (a 400 naming the place)."""
    if problem := unstorable(where, value):
        raise BadRequestError(problem, field=where)


def checked_feedback(rt: Runtime, feedback: str | None) -> str | None:
    """A decision's feedback reaches the model as a message does (a user message after the
    results, or in a denied call's result): the same limit, in UTF-8 bytes."""
    if feedback and len(feedback.encode()) > rt.settings.max_message_bytes:
        raise PayloadTooLargeError(
            f"feedback: {len(feedback.encode())} bytes; the limit is {rt.settings.max_message_bytes}",
            field="feedback",
        )
    return feedback or None


def cancel_turn(rt: Runtime, ws_id: str, body: shapes.Cancel, by: str) -> tuple[int, dict[str, Any]]:
    done = cancel.cancel(rt, ws_id, by=by, turn_id=body.turn_id)
    if done.ended:  # a queued turn, withdrawn: it never started, so it has no children
        return 200, {"turn_id": done.turn_id, "cancel_requested": True, "status": "cancelled"}
    cancel.stop_children(rt, done.turn_id, by=by)  # now, not when the turn's running batch ends
    return 202, {"turn_id": done.turn_id, "cancel_requested": True, "status": "active"}
