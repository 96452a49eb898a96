"""Approvals pushed out: a workstream with `notify_approvals` sends its owner, through their
notify channels, each step whose calls wait for a person, with a signed link that opens the
decision in the web client (docs/notify.md#approvals-pushed-out).

A link names the workstream, the turn and the step whose calls wait, and an expiry, signed with
a key of the service's own (stored in the database, never sent; app/signed_steps.py): it shows those calls and
decides them only, until it expires, as their owner would (by the owner's name, via `link`); a
later step needs a later link. It is a bearer permission: it goes to the owner's own channels,
and a channel that is not private is the owner's choice.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any
from urllib.parse import urlencode

from app import signed_steps
from app.engine.life import approvals
from app.engine.life import calls as call_store
from app.errors import ConflictError
from app.gateway import client as gateway
from app.gateway.request import NotifyRequest
from app.runtime import Runtime
from app.storage import service_keys
from app.storage.models import CallStatus, ToolCall, Turn, User, Workstream

log = logging.getLogger(__name__)

LINK_SECONDS = 24 * 3600  # how long a link decides, unless approvals time out sooner
KEY_NAME = "approval_links"
PAGE = "/#decide?"  # where the web client opens a link (app/web/static/js/decide.js)
VIA = "link"
MESSAGE_HEADERS = 3  # the calls a message names; the rest are counted


def _key(rt: Runtime) -> str:
    return service_keys.get_or_make(rt.db, KEY_NAME, secrets.token_hex(32))[0]


def link_query(rt: Runtime, ws_id: str, turn_id: str, step: int) -> dict[str, str]:
    """The signed query a link carries (ws, turn, step, exp, sig)."""
    timeout = rt.settings.tools.approval_timeout_seconds
    seconds = min(timeout, LINK_SECONDS) if timeout > 0 else LINK_SECONDS
    return {"ws": ws_id, **signed_steps.signed(_key(rt), ws_id, turn_id, step, seconds)}


def page_url(rt: Runtime, query: dict[str, str]) -> str:
    """Where the person opens the link: the web client at `[notify] public_url` (its path alone
    when none is set: the person opens it on the service's own address)."""
    return (rt.settings.notify.public_url or "") + PAGE + urlencode(query)


def push(rt: Runtime, ws_id: str, turn_id: str, step: int) -> bool:
    """Tell the workstream's owner, through their channels, that the step's calls wait; whether
    a channel took the message. Nothing is sent for a step no longer waiting, for a workstream
    without `notify_approvals`, or without an owner (the operator has no channels)."""
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
        owner = s.get(User, ws.owner_id) if ws is not None and ws.owner_id else None
        rows = _waiting(s, turn_id, step)
    if ws is None or owner is None or not ws.notify_approvals or not rows:
        return False
    url = page_url(rt, link_query(rt, ws_id, turn_id, step))
    named = [f"{r.header or r.func_name}{_risk(r)}" for r in rows[:MESSAGE_HEADERS]]
    more = f" and {len(rows) - MESSAGE_HEADERS} more" if len(rows) > MESSAGE_HEADERS else ""
    message = (
        f"{ws.name}: {len(rows)} call(s) wait for your decision: {'; '.join(named)}{more}. Decide: {url}"
    )
    wanted = NotifyRequest(message=message, title="Approval needed", username=owner.name)
    outcome = gateway.send(rt.db, rt.settings.notify, wanted)
    if not outcome.ok:  # no channel, or a platform down: said in the log; the web client still shows it
        log.warning("approval of workstream %s not pushed to %s: %s", ws_id, owner.name, outcome.reason)
    return outcome.ok


def view(rt: Runtime, ws_id: str, query: dict[str, str]) -> dict[str, Any]:
    """What a link shows: the workstream's name and the calls that wait (NotFoundError for a link
    that is not one; ConflictError once they no longer wait)."""
    ws, turn = _checked(rt, ws_id, query)
    with rt.db.reader() as s:
        rows = _waiting(s, turn.id, turn.step)
    if not rows:
        raise ConflictError(signed_steps.NO_LONGER_WAITING)
    return {
        "ws_id": ws_id,
        "name": ws.name,
        "items": [call_store.item(r) for r in rows],
        "expires_at": int(query["exp"]),
    }


def decide(
    rt: Runtime, ws_id: str, query: dict[str, str], approved: bool, feedback: str | None, call_id: str | None
) -> dict[str, Any]:
    """Decide the link's calls (or one of them, `call_id`) as the workstream's owner."""
    ws, turn = _checked(rt, ws_id, query)
    with rt.db.reader() as s:
        rows = _waiting(s, turn.id, turn.step)
        owner = s.get(User, ws.owner_id) if ws.owner_id else None
    if call_id is not None and call_id not in {r.call_id for r in rows}:
        raise ConflictError(f"call {call_id} is not one this link decides, or no longer waits")
    if not rows:
        raise ConflictError(signed_steps.NO_LONGER_WAITING)
    decision = approvals.Decision(
        approved=approved,
        feedback=feedback,
        call_id=call_id,
        by=owner.name if owner is not None else "operator",
        by_id=owner.id if owner is not None else None,
        how="user",
        via=VIA,
    )
    return approvals.decide(rt, ws_id, decision).as_dict()


def _checked(rt: Runtime, ws_id: str, query: dict[str, str]) -> tuple[Workstream, Turn]:
    """The workstream and the turn of a link that may decide (else NotFoundError, ConflictError)."""
    turn = signed_steps.waiting_turn(rt, _key(rt), ws_id, query, "approval link")
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
    if ws is None:  # deleted, and its turns with it, since waiting_turn read
        raise ConflictError(signed_steps.NO_LONGER_WAITING)
    return ws, turn


def _waiting(s: Any, turn_id: str, step: int) -> list[ToolCall]:
    return [r for r in call_store.batch(s, turn_id, step) if r.status == CallStatus.PENDING]


def _risk(row: ToolCall) -> str:
    risk = (row.verdict or {}).get("risk")
    return f" (risk {risk})" if risk else ""
