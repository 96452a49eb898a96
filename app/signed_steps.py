"""A signed link to one step whose calls wait for a person: it names a subject (a run, a
workstream), the turn and the step, and an expiry, signed (HMAC-SHA256) with a key the service
keeps and never sends. It decides that step's calls only, until it expires; a later step needs
a later link. A run's decide links (app/jobs/links.py) and pushed approval links
(app/approval_links.py) are both such links."""

from __future__ import annotations

import hashlib
import hmac
import time

from app.errors import ConflictError, NotFoundError
from app.runtime import Runtime
from app.storage.models import Turn, TurnPhase, TurnStatus

NO_LONGER_WAITING = "the calls this link decides are no longer waiting"


def signature(key: str, subject: str, turn_id: str, step: int, expires: int) -> str:
    return hmac.new(
        key.encode(), f"{subject}:{turn_id}:{step}:{expires}".encode(), hashlib.sha256
    ).hexdigest()


def signed(key: str, subject: str, turn_id: str, step: int, seconds: float) -> dict[str, str]:
    """The query a link carries: turn, step, exp (Unix seconds) and sig."""
    expires = int(time.time() + seconds)
    sig = signature(key, subject, turn_id, step, expires)
    return {"turn": turn_id, "step": str(step), "exp": str(expires), "sig": sig}


def waiting_turn(rt: Runtime, key: str | None, subject: str, query: dict[str, str], what: str) -> Turn:
    """The turn a link's step belongs to, while that step's calls wait. NotFoundError for a link
    that is not one (altered, expired, another subject's, no key); ConflictError once the step no
    longer waits."""
    turn_id, step, expires, sig = (query.get(k, "") for k in ("turn", "step", "exp", "sig"))
    valid = (
        key is not None
        and step.isascii() and step.isdecimal() and len(step) <= 9
        and expires.isascii() and expires.isdecimal() and len(expires) <= 12
        and int(expires) >= time.time()
        and hmac.compare_digest(signature(key, subject, turn_id, int(step), int(expires)), sig)
    )  # fmt: skip
    if not valid:
        raise NotFoundError(f"no such {what} (it expired, or was altered)")
    with rt.db.reader() as s:
        turn = s.get(Turn, turn_id)
    waiting = turn is not None and turn.status == TurnStatus.ACTIVE and turn.phase == TurnPhase.APPROVAL
    if not waiting or turn is None or turn.step != int(step):
        raise ConflictError(NO_LONGER_WAITING)
    return turn
