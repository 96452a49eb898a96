"""A run's decide links: `approval.requested` carries one, so that whoever the webhook reaches
can approve or deny the waiting calls without an API token. A link names the run, its turn and
the step whose calls wait, and an expiry, signed with the run's own key (never sent anywhere;
app/signed_steps.py): it decides those calls only, until it expires; a later step needs a later
link."""

from __future__ import annotations

import secrets
from urllib.parse import urlencode

from sqlalchemy import update
from sqlmodel import col

from app import signed_steps
from app.engine.life import approvals
from app.runtime import Runtime
from app.storage.models import Run

LINK_SECONDS = 24 * 3600
PATH = "/v1/hooks/runs/{run_id}/decide"
DECIDED_BY = "decide link"


def _key(rt: Runtime, run: Run) -> str:
    """The run's key, made the first time one of its links is (the first writer's stands)."""
    if run.signing_key:
        return run.signing_key
    with rt.db.session() as s:
        s.exec(
            update(Run)
            .where(col(Run.id) == run.id, col(Run.signing_key).is_(None))
            .values(signing_key=secrets.token_hex(32))
        )
        stored = s.get(Run, run.id)
        assert stored is not None and stored.signing_key is not None
        return stored.signing_key


def decide_link(rt: Runtime, run: Run, turn_id: str, step: int) -> str:
    query = signed_steps.signed(_key(rt, run), run.id, turn_id, step, LINK_SECONDS)
    return PATH.format(run_id=run.id) + "?" + urlencode(query)


def decide(
    rt: Runtime, run_id: str, args: dict[str, str], approved: bool, feedback: str | None
) -> dict[str, object]:
    """Decide every call the link's step waits on; NotFoundError for a link that is not one
    (altered, expired, another run's), ConflictError once that step no longer waits."""
    with rt.db.reader() as s:
        run = s.get(Run, run_id)
    key = run.signing_key if run is not None else None
    signed_steps.waiting_turn(rt, key, run_id, args, "decide link")
    assert run is not None  # a link with no run is no link: waiting_turn said so
    decision = approvals.Decision(approved=approved, feedback=feedback, by=DECIDED_BY, how="user", via="link")
    return approvals.decide(rt, run.ws_id, decision).as_dict()
